package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The database outage on the Kafka binder: PostgreSQL away for longer than all the attempts of a record would last,
 * while records with copies arrive on four partitions for four consumers; nothing reaches the dead-letter topic, and
 * every event is applied once when PostgreSQL answers again. The binding is a batch binding ({@code recordThings}),
 * which the library does not pause ({@link OutagePausesTheBindingOnKafkaIT} shows a single-message binding paused): a
 * short {@code max-hold} makes the consumers give their records back (the container seeks back to them) during the
 * outage, as they would before Kafka's poll interval runs out.
 */
@SpringBootTest(
        classes = DatabaseOutageOnKafkaIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThings",
            "spring.cloud.stream.default-binder=kafka",
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.destination="
                    + DatabaseOutageOnKafkaIT.TOPIC,
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.group=kafka-outage",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.batch-mode=true",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.concurrency=4",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.max-attempts=3",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.back-off-initial-interval=200",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.back-off-max-interval=400",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThings-in-0.consumer.start-offset=earliest",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThings-in-0.consumer.dlq-name="
                    + DatabaseOutageOnKafkaIT.DEAD_LETTERS,
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.max-hold=3s"
        })
@EmbeddedKafka(
        partitions = 4,
        topics = {DatabaseOutageOnKafkaIT.TOPIC, DatabaseOutageOnKafkaIT.DEAD_LETTERS})
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
class DatabaseOutageOnKafkaIT {

    /** The service: its business function of the payloads of a batch, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<List<ThingHappened>> recordThings(JdbcTemplate jdbcTemplate) {
            return things -> jdbcTemplate.batchUpdate(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)",
                    things,
                    things.size(),
                    (statement, thing) -> {
                        statement.setObject(1, thing.thingId());
                        statement.setBigDecimal(2, thing.amount());
                    });
        }
    }

    /** The event's name: the route check accepts an event only from the topic of its own name. */
    static final String TOPIC = ThingHappened.NAME;

    static final String DEAD_LETTERS = "kafka-outage.dlq";

    private static final TestDatabase database = TestPostgres.newDatabase("kafkaoutage");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    HealthIndicator idempotencyHealthIndicator;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private final EnvelopeCodec codec = new EnvelopeCodec();

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void anOutageLongerThanEveryAttemptDeadLettersNoRecordAndEachEventIsAppliedOnce() {
        EventEnvelope<ThingHappened> before = Things.thingHappened();
        send(before, 0);
        await().atMost(Duration.ofSeconds(60)).until(() -> effects(before) == 1);

        postgres.cut();
        List<EventEnvelope<ThingHappened>> during =
                IntStream.range(0, 12).mapToObj(i -> Things.thingHappened()).toList();
        for (int i = 0; i < during.size(); i++) {
            send(during.get(i), i % 4);
            send(during.get(i), (i + 1) % 4);
        }
        await().atMost(Duration.ofSeconds(10))
                .alias("consumption halted")
                .until(() ->
                        this.idempotencyHealthIndicator.health().getStatus().equals(Status.OUT_OF_SERVICE));
        // Longer than all the attempts of a record, and than two holds of 3 s: halted, nothing dead-lettered, all
        // along.
        await().during(Duration.ofSeconds(10)).atMost(Duration.ofSeconds(12)).untilAsserted(() -> {
            assertThat(deadLetters()).as("dead-lettered during the outage").isZero();
            assertThat(this.idempotencyHealthIndicator.health().getStatus()).isEqualTo(Status.OUT_OF_SERVICE);
        });
        postgres.restore();

        await().atMost(Duration.ofSeconds(60)).until(() -> applied(during) == during.size());
        assertThat(during).allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
        assertThat(this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class))
                .isEqualTo(1 + during.size());
        assertThat(deadLetters()).as("nothing dead-lettered").isZero();
        assertThat(this.idempotencyHealthIndicator.health().getStatus()).isEqualTo(Status.UP);
        assertThat(this.recorder.attempts())
                .as("records held past max-hold were given back, and delivered again")
                .anySatisfy(attempt -> assertThat(attempt.failure())
                        .hasStackTraceContaining("given back to the broker, to be delivered again"));
    }

    private void send(EventEnvelope<?> event, int partition) {
        KafkaRecords.send(
                this.kafka, List.of(new ProducerRecord<>(TOPIC, partition, "copy", this.codec.encode(event))));
    }

    /**
     * The records of the dead-letter topic, from its partitions' offsets: no consumer group, no assignment to wait
     * for (a poll before the assignment counts nothing).
     */
    private long deadLetters() {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString());
        try (KafkaConsumer<String, byte[]> consumer =
                new KafkaConsumer<>(properties, new StringDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(DEAD_LETTERS).stream()
                    .map(partition -> new TopicPartition(partition.topic(), partition.partition()))
                    .toList();
            Map<TopicPartition, Long> beginnings = consumer.beginningOffsets(partitions);
            return consumer.endOffsets(partitions).entrySet().stream()
                    .mapToLong(end -> end.getValue() - beginnings.get(end.getKey()))
                    .sum();
        }
    }

    private long applied(List<EventEnvelope<ThingHappened>> events) {
        return events.stream().filter(event -> effects(event) > 0).count();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
