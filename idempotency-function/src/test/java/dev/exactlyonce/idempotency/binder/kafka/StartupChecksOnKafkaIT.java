package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.outbox.Outbox;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.binder.kafka.properties.KafkaConsumerProperties;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.messaging.MessageChannel;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * What the library checks when a guarded Kafka binding starts:
 *
 * <ul>
 *   <li>it reads records natively, so its dead-letter producer needs serializers for the key and value as the consumer
 *       deserialized them. The library writes back bytes (the binder's default, which the other tests of this package
 *       keep: they set no deserializer) and strings; a consumer that deserializes keys to anything else, with no
 *       serializer for its dead letters, would lose every rejected record with a key, and is refused;
 *   <li>a record held during an outage ({@code max-hold}, plus the statement that met it) must fit in the consumer's
 *       {@code max.poll.interval.ms}, or the consumer would leave its group each time: a binding where it does not
 *       is refused;
 *   <li>the outbox relay sends through a binding named like its destination, whose sends it sets to wait for the
 *       broker's acknowledgement: one the service bound before the relay could set it up would mark rows published
 *       that the broker never took, and is refused.
 * </ul>
 */
@EmbeddedKafka(partitions = 1)
@Tag("kafka")
class StartupChecksOnKafkaIT {

    /** The service: its business function, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    /** The event's name: the route check accepts an event only from the topic of its own name. */
    private static final String TOPIC = ThingHappened.NAME;

    private static final String DEAD_LETTERS = "kafka-startup.dlq";

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    private static final String CONSUMER = "spring.cloud.stream.kafka.bindings." + BINDING + ".consumer.";

    private static final String KEY_DESERIALIZER = CONSUMER + "configuration.key.deserializer=";

    @Test
    void aConsumerThatReadsKeysAsStringsDeadLettersAKeyedRecordAsItCame(EmbeddedKafkaBroker kafka) throws Exception {
        String poison = "{\"event_id\": \"" + UUID.randomUUID() + "\"}";
        try (ConfigurableApplicationContext service = start(
                        kafka,
                        KEY_DESERIALIZER + StringDeserializer.class.getName(),
                        CONSUMER + "start-offset=earliest");
                KafkaProducer<String, byte[]> producer = new KafkaProducer<>(
                        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.getBrokersAsString()),
                        new StringSerializer(),
                        new ByteArraySerializer())) {
            producer.send(new ProducerRecord<>(TOPIC, "thing-42", poison.getBytes(UTF_8)))
                    .get();

            ConsumerRecord<byte[], byte[]> deadLetter = KafkaRecords.first(kafka, DEAD_LETTERS, Duration.ofSeconds(60));

            assertThat(new String(deadLetter.key(), UTF_8)).isEqualTo("thing-42");
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
        Throwable failure = catchThrowable(() -> start(kafka, KEY_DESERIALIZER + LongDeserializer.class.getName())
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
                        KEY_DESERIALIZER + LongDeserializer.class.getName(),
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
                        .contains("Binding " + BINDING + " may hold a record PT5M")
                        .contains("max.poll.interval.ms (PT1M)"));
    }

    /**
     * A message given back with its hold nearly spent may have taken the trial just before: its transaction then waits
     * up to the pool's connection-timeout for a connection, and its claim up to socket-timeout for the answer. 4m +
     * 90s + 30s does not fit in 5m30s.
     */
    @Test
    void thePoolsConnectionTimeoutCountsInTheHold(EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(() -> start(
                        kafka,
                        "spring.datasource.hikari.connection-timeout=90000",
                        CONSUMER + "configuration.max.poll.interval.ms=330000")
                .close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message)
                        .contains("Binding " + BINDING + " may hold a record PT6M")
                        .contains("max.poll.interval.ms (PT5M30S)"));
    }

    /**
     * Unset, the consumer's max.poll.interval.ms is set to fit the hold at the defaults (4m + 30s + 30s) and a minute
     * more for the poll's other records.
     */
    @Test
    void withThePollIntervalUnsetTheDefaultsStart(EmbeddedKafkaBroker kafka) {
        try (ConfigurableApplicationContext service = start(kafka)) {
            ExtendedPropertiesBinder<?, ?, ?> binder = (ExtendedPropertiesBinder<?, ?, ?>)
                    service.getBean(BinderFactory.class).getBinder("kafka", MessageChannel.class);
            assertThat(((KafkaConsumerProperties) binder.getExtendedConsumerProperties(BINDING)).getConfiguration())
                    .containsEntry("max.poll.interval.ms", "360000");
        }
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

    @Test
    void aBindingNamedLikeTheOutboxDestinationBoundBeforeTheRelayRefusesToStart(EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(() -> start(
                        kafka,
                        "idempotency.outbox.destination=outbox-startup",
                        // Bound as the context starts, before the relay: without the acknowledgement it waits for.
                        "spring.cloud.stream.output-bindings=outbox-startup")
                .close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message)
                        .contains("The outbox relay publishes to outbox-startup through a binding of that name")
                        .contains("spring.cloud.stream.output-bindings"));
    }

    /**
     * The same binding, for a destination the service first writes to once it runs ({@code Outbox.write}): the relay
     * publishes none of its rows through it, each time it tries (the first refusal set the binding's producer settings
     * half-way, which a second check took as prepared: the rows then went out without waiting for the broker, and
     * were marked published), and counts no attempt against them: their route is held.
     */
    @Test
    void aBindingNamedLikeADestinationWrittenToLaterBoundBeforeTheRelayPublishesNoneOfItsRows(
            EmbeddedKafkaBroker kafka) {
        try (ConfigurableApplicationContext service = start(
                kafka,
                "idempotency.outbox.destination=outbox-startup-relay",
                "idempotency.outbox.relay.poll-interval=200ms",
                "spring.cloud.stream.output-bindings=outbox-startup-later")) {
            service.getBean(TransactionTemplate.class)
                    .executeWithoutResult(status -> service.getBean(Outbox.class)
                            .write(
                                    "outbox-startup-later",
                                    List.of(new OutgoingEvent("test.thing.noticed.v1", "later", Map.of("n", 1)))));
            JdbcTemplate jdbc = service.getBean(JdbcTemplate.class);

            await().during(Duration.ofSeconds(5))
                    .atMost(Duration.ofSeconds(30))
                    .until(
                            () -> jdbc.queryForMap(
                                    "SELECT published_at IS NULL AS unpublished, attempts FROM outbox_event"),
                            row -> Boolean.TRUE.equals(row.get("unpublished"))
                                    && ((Number) row.get("attempts")).intValue() == 0);
        }
    }

    /** The test service on Kafka, with its guarded binding {@value #BINDING} on {@value #TOPIC}. */
    private static ConfigurableApplicationContext start(EmbeddedKafkaBroker kafka, String... properties) {
        TestDatabase database = TestPostgres.newDatabase("kafkastartup");
        List<String> all = new ArrayList<>(List.of(
                "spring.datasource.url=" + database.jdbcUrl(),
                "spring.datasource.username=" + database.username(),
                "spring.datasource.password=" + database.password(),
                "spring.cloud.function.definition=idempotencyGuard|recordThing",
                "spring.cloud.stream.default-binder=kafka",
                "spring.cloud.stream.kafka.binder.brokers=" + kafka.getBrokersAsString(),
                "spring.cloud.stream.bindings." + BINDING + ".destination=" + TOPIC,
                "spring.cloud.stream.bindings." + BINDING + ".group=kafka-startup",
                CONSUMER + "dlq-name=" + DEAD_LETTERS,
                "server.port=0"));
        all.addAll(List.of(properties));
        // As arguments: the builder's properties are defaults, below application.yml's.
        return new SpringApplicationBuilder(Service.class)
                .run(all.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private static List<String> messages(Throwable failure) {
        List<String> messages = new ArrayList<>();
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            messages.add(String.valueOf(cause.getMessage()));
        }
        return messages;
    }
}
