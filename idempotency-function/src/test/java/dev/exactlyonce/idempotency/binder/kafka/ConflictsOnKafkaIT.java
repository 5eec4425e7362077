package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
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
 * A conflict that outlasts the Kafka error handler's own count, on Kafka with Spring AMQP on the class path too (as in
 * a service that has both binders): the effect's insert waits for a table lock another transaction holds, past the
 * service's {@code lock_timeout}, for longer than ten give-backs. The record is given back each time, and the
 * container's error handler must go on seeking back to it rather than count the give-backs as failures and skip the
 * record after ten. Once the lock is released, the event is applied once, nothing dead-lettered.
 */
@DirtiesContext
@SpringBootTest(
        classes = ConflictsOnKafkaIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=kafka",
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.destination=" + ConflictsOnKafkaIT.TOPIC,
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.group=kafka-conflicts",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.max-attempts=1",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.start-offset=earliest",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.dlq-name="
                    + ConflictsOnKafkaIT.DEAD_LETTERS,
            "spring.datasource.hikari.connection-init-sql=SET lock_timeout = '100ms'",
            "idempotency.conflicts.max-give-backs=30",
            // Short holds: the conflict lasts eleven of them.
            "idempotency.conflicts.first-hold=50ms",
            "idempotency.conflicts.longest-hold=400ms"
        })
@EmbeddedKafka(
        partitions = 1,
        topics = {ConflictsOnKafkaIT.TOPIC, ConflictsOnKafkaIT.DEAD_LETTERS})
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
class ConflictsOnKafkaIT {

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
    static final String TOPIC = ThingHappened.NAME;

    static final String DEAD_LETTERS = "kafka-conflicts.dlq";

    private static final TestDatabase database = TestPostgres.newDatabase("kafkaconflicts");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    DeliveryRecorder recorder;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aRecordThatConflictsLongerThanTenGiveBacksIsAppliedOnceTheConflictEnds() throws Exception {
        EventEnvelope<ThingHappened> thing = Things.thingHappened();
        try (Connection holder =
                DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password())) {
            holder.setAutoCommit(false);
            try (Statement statement = holder.createStatement()) {
                statement.execute("LOCK TABLE thing_effect IN EXCLUSIVE MODE");
            }
            send(thing);
            await().atMost(Duration.ofSeconds(90))
                    .alias("eleven attempts of the record, each given back after a conflict")
                    .until(() -> this.recorder.attempts(thing.eventId()).size() >= 11);
            holder.rollback();
        }

        // The recorder notes an attempt once its transaction completed: wait for it, not for the effect, which is
        // visible a moment before.
        await().atMost(Duration.ofSeconds(30))
                .alias("an attempt committed once the lock is released")
                .until(() -> this.recorder.attempts(thing.eventId()).stream()
                        .anyMatch(attempt -> attempt.failure() == null));
        assertThat(effects(thing)).as("the event applied once").isEqualTo(1);
        assertThat(this.recorder.attempts(thing.eventId()))
                .last()
                .satisfies(attempt -> assertThat(attempt.failure()).isNull());
    }

    private void send(EventEnvelope<?> event) {
        KafkaRecords.send(this.kafka, List.of(new ProducerRecord<>(TOPIC, "thing", new EnvelopeCodec().encode(event))));
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
