package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Consumer;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
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
 * A rejected record whose dead letter cannot be published, on Kafka: the dead-letter topic is not there (topics are
 * not created automatically, as in a cluster whose topics its operators declare). The binder logs the failed send and
 * goes on, so the record was lost, neither applied nor dead-lettered. Now the delivery fails instead: the record is
 * delivered again after a growing back-off, each time said at WARN, and once the topic exists, it is dead-lettered and
 * the records behind it are applied.
 */
@SpringBootTest(
        classes = UnpublishedDeadLettersOnKafkaIT.Service.class,
        properties = {
            "spring.config.name=minimal-service",
            "spring.cloud.stream.default-binder=kafka",
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.kafka.binder.auto-create-topics=false",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.destination=" + ThingHappened.NAME,
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.group=kafka-unpublished",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.start-offset=earliest",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.dlq-name="
                    + UnpublishedDeadLettersOnKafkaIT.DEAD_LETTERS,
            // The producer waits a second for a topic that is not there, not a minute.
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.dlq-producer-properties"
                    + ".configuration.max.block.ms=1000"
        })
@EmbeddedKafka(partitions = 1, topics = ThingHappened.NAME, brokerProperties = "auto.create.topics.enable=false")
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
// Its embedded broker stops with the class: the context must not stay cached, its consumers reconnecting to whichever
// broker later takes that port, and taking part in another test's topic.
@DirtiesContext
class UnpublishedDeadLettersOnKafkaIT {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    static final String DEAD_LETTERS = "kafka-unpublished.dlq";

    private static final TestDatabase database = TestPostgres.newDatabase("kafkaunpublished");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aRecordWhoseDeadLetterCannotBePublishedIsDeliveredAgainUntilItIsThenTheOnesBehindIt() throws Exception {
        String poison = "not json " + UUID.randomUUID();
        EventEnvelope<ThingHappened> next = Things.thingHappened();

        KafkaRecords.send(
                this.kafka,
                List.of(
                        new ProducerRecord<>(ThingHappened.NAME, "poison", poison.getBytes(UTF_8)),
                        new ProducerRecord<>(ThingHappened.NAME, "next", new EnvelopeCodec().encode(next))));

        await().atMost(Duration.ofSeconds(60))
                .alias("the failed dead letter said at WARN, on two deliveries")
                .until(() -> unpublishedWarnings() >= 2);
        if (!batches()) {
            assertThat(amounts(next)).as("the record behind it waits, in order").isEmpty();
        }

        try (AdminClient admin = AdminClient.create(
                Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString()))) {
            admin.createTopics(List.of(new NewTopic(DEAD_LETTERS, 1, (short) 1)))
                    .all()
                    .get();
        }

        assertThat(new String(
                        KafkaRecords.first(this.kafka, DEAD_LETTERS, Duration.ofSeconds(90))
                                .value(),
                        UTF_8))
                .isEqualTo(poison);
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(amounts(next)).containsExactly(new BigDecimal("2.500")));
    }

    /**
     * Whether the binding takes batches: the other records of the batch are then applied with it, before its rejected
     * record's dead letter is sent (and, the batch given back, discarded as copies when it comes again).
     */
    boolean batches() {
        return false;
    }

    private long unpublishedWarnings() {
        return this.logs.events().stream()
                .filter(event -> event.getLevel() == Level.WARN)
                .filter(event -> event.getFormattedMessage().startsWith("Could not publish the dead letter of"))
                .count();
    }

    private List<BigDecimal> amounts(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?",
                BigDecimal.class,
                event.payload().thingId());
    }
}
