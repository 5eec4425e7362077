package dev.exactlyonce.stock;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;

/**
 * What the library checks when a guarded Kafka binding starts:
 *
 * <ul>
 *   <li>it reads records natively, so its dead-letter producer needs serializers for the key and value as the consumer
 *       deserialized them. The library writes back bytes (ReserveStockOnKafkaIT dead-letters a keyed record with the
 *       profile's configuration, which sets none) and strings; a consumer that deserializes keys to anything else,
 *       with no serializer for its dead letters, would lose every rejected record with a key, and is refused;
 *   <li>a record held during an outage ({@code max-hold}, plus the statement that met it) must fit in the consumer's
 *       {@code max.poll.interval.ms}, or the consumer would leave its group each time: a binding where it does not
 *       is refused.
 * </ul>
 */
@EmbeddedKafka(partitions = 1)
class StartupChecksOnKafkaIT {

    private static final String CONSUMER =
            "spring.cloud.stream.kafka.bindings.idempotencyGuardreserveStock-in-0.consumer.";

    @Test
    void aConsumerThatReadsKeysAsStringsDeadLettersAKeyedRecordAsItCame(EmbeddedKafkaBroker kafka) throws Exception {
        String poison = "{\"event_id\": \"" + UUID.randomUUID() + "\"}";
        try (ConfigurableApplicationContext service = start(
                        kafka,
                        CONSUMER
                                + "configuration.key.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
                        CONSUMER + "start-offset=earliest");
                KafkaProducer<String, byte[]> producer = new KafkaProducer<>(
                        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.getBrokersAsString()),
                        new StringSerializer(),
                        new ByteArraySerializer())) {
            producer.send(new ProducerRecord<>("order.order.placed.v1", "order-42", poison.getBytes(UTF_8)))
                    .get();

            ConsumerRecord<byte[], byte[]> deadLetter = firstDeadLetter(kafka);

            assertThat(new String(deadLetter.key(), UTF_8)).isEqualTo("order-42");
            assertThat(new String(deadLetter.value(), UTF_8)).isEqualTo(poison);
            assertThat(new String(
                            deadLetter
                                    .headers()
                                    .lastHeader("x-exception-message")
                                    .value(),
                            UTF_8))
                    .startsWith("MISSING_FIELD: ");
        }
    }

    @Test
    void aConsumerThatReadsKeysAsLongsWithoutASerializerForItsDeadLettersIsRefusedAtStartUp(EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(() -> start(
                        kafka,
                        CONSUMER
                                + "configuration.key.deserializer=org.apache.kafka.common.serialization.LongDeserializer")
                .close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message)
                        .contains("reads record keys with org.apache.kafka.common.serialization.LongDeserializer")
                        .contains("dead-letter producer has no key.serializer"));
    }

    @Test
    void theSameConsumerWithASerializerForTheBindersProducersStarts(EmbeddedKafkaBroker kafka) {
        start(
                        kafka,
                        CONSUMER
                                + "configuration.key.deserializer=org.apache.kafka.common.serialization.LongDeserializer",
                        "spring.cloud.stream.kafka.binder.producer-properties[key.serializer]="
                                + "org.apache.kafka.common.serialization.LongSerializer")
                .close();
    }

    @Test
    void aMaxHoldThatDoesNotFitInThePollIntervalIsRefusedAtStartUp(EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(() -> start(kafka, CONSUMER + "configuration.max.poll.interval.ms=60000")
                .close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message)
                        .contains("Binding idempotencyGuardreserveStock-in-0 may hold a record PT4M30S")
                        .contains("max.poll.interval.ms (PT1M)"));
    }

    @Test
    void aPollIntervalSetThroughSpringBootsKafkaPropertiesCountsToo(EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(
                () -> start(kafka, "spring.kafka.consumer.max-poll-interval=2m").close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message).contains("max.poll.interval.ms (PT2M)"));
    }

    @Test
    void aLongerMaxHoldStartsWithALongerPollInterval(EmbeddedKafkaBroker kafka) {
        start(
                        kafka,
                        "idempotency.outage.max-hold=10m",
                        "spring.cloud.stream.kafka.binder.consumer-properties[max.poll.interval.ms]=900000")
                .close();
    }

    private static ConfigurableApplicationContext start(EmbeddedKafkaBroker kafka, String... properties) {
        TestDatabase database = TestPostgres.newDatabase("stockdlqser");
        List<String> all = new ArrayList<>(List.of(
                "spring.datasource.url=" + database.jdbcUrl(),
                "spring.datasource.username=" + database.username(),
                "spring.datasource.password=" + database.password(),
                "spring.cloud.stream.kafka.binder.brokers=" + kafka.getBrokersAsString(),
                "server.port=0",
                "management.server.port=0"));
        all.addAll(List.of(properties));
        // As arguments: the builder's properties are defaults, below application.yml's.
        return new SpringApplicationBuilder(StockServiceApplication.class)
                .profiles("kafka")
                .run(all.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private static ConsumerRecord<byte[], byte[]> firstDeadLetter(EmbeddedKafkaBroker kafka) {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                Map.of(
                        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                        kafka.getBrokersAsString(),
                        ConsumerConfig.GROUP_ID_CONFIG,
                        "dead-letters-" + UUID.randomUUID(),
                        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                        "earliest"),
                new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.subscribe(List.of("stock.events.dlq"));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    return record;
                }
            }
        }
        throw new AssertionError("Nothing reached stock.events.dlq within 60 s: the record was not dead-lettered");
    }

    private static List<String> messages(Throwable failure) {
        List<String> messages = new ArrayList<>();
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            messages.add(String.valueOf(cause.getMessage()));
        }
        return messages;
    }
}
