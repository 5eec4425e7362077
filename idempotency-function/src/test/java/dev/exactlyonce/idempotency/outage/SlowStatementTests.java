package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * One message's statement that waits, made for real on PostgreSQL with the library's defaults for the bounds (derived
 * from {@code socket-timeout}, 2 s here: a lock is waited for 1 s, a statement runs 1.5 s at most): a row another
 * transaction holds locked, or a statement of the business function that runs too long. Each is that message's
 * conflict, not the database's outage: no halt, the other messages go on, and the message is tried again after a
 * back-off, then dead-lettered once its tries are spent ({@code max-give-backs}, 2 here) if it never gets through.
 * Without the bounds, the statement would wait until the socket timed out, a halt of every guarded binding.
 */
@SpringBootTest(
        properties = {
            "idempotency.outage.socket-timeout=2s",
            "idempotency.conflicts.max-give-backs=2",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
class SlowStatementTests {

    private static final TestDatabase database = TestPostgres.newDatabase("slowstatement");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @TestConfiguration
    static class Meters {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    MeterRegistry meterRegistry;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterEach
    void mend() {
        this.jdbcTemplate.execute("DROP TRIGGER IF EXISTS slow ON thing_effect");
        this.deliveries.resetLastError();
    }

    @Test
    void aRowLockedByAnotherTransactionIsTheMessagesConflictNotAHalt() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        double halts = halts();
        CompletableFuture<Void> delivery;
        try (Connection holder =
                DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password())) {
            holder.setAutoCommit(false);
            try (Statement statement = holder.createStatement()) {
                statement.execute("LOCK TABLE thing_effect IN EXCLUSIVE MODE");
            }
            delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(30));
            await().atMost(Duration.ofSeconds(15))
                    .alias("tried again after the binding's two attempts, each waiting 1 s for the lock")
                    .until(() -> this.recorder.attempts(event.eventId()).size() > 2);
            holder.rollback();
        }
        delivery.get(30, TimeUnit.SECONDS);

        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.recorder.attempts(event.eventId()))
                .as("every attempt but the last waited for the lock")
                .hasSizeGreaterThan(2)
                .satisfies(attempts -> assertThat(attempts.subList(0, attempts.size() - 1))
                        .allSatisfy(attempt -> assertThat(attempt.failure()).hasStackTraceContaining("lock timeout")));
        assertThat(halts() - halts).as("no halt").isZero();
    }

    @Test
    void aStatementThatRunsTooLongIsTheMessagesConflictAndTheOthersGoOn() throws Exception {
        EventEnvelope<ThingHappened> slow = Things.thingHappened();
        EventEnvelope<ThingHappened> other = Things.thingHappened();
        double halts = halts();
        this.jdbcTemplate.execute("""
                CREATE OR REPLACE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.thing_id = '%s' THEN
                        PERFORM pg_sleep(5);
                    END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER slow BEFORE INSERT ON thing_effect FOR EACH ROW EXECUTE FUNCTION slow()""".formatted(slow.payload().thingId()));

        this.deliveries.deliverUntilTaken(slow, Duration.ofSeconds(60));
        this.deliveries.deliverUntilTaken(other, Duration.ofSeconds(10));

        assertThat(this.recorder.attempts(slow.eventId()))
                .as("the binding's two attempts on the delivery, then one on each of the two tries after a back-off,"
                        + " each ended by the statement timeout")
                .hasSize(4)
                .allSatisfy(attempt -> assertThat(attempt.failure())
                        .hasStackTraceContaining("canceling statement due to statement timeout"));
        assertThat(this.deliveries.lastError())
                .as("the slow message dead-lettered once its tries were spent")
                .isInstanceOfSatisfying(
                        ErrorMessage.class,
                        error -> assertThat(error.getPayload())
                                .hasStackTraceContaining("canceling statement due to statement timeout"));
        assertThat(effects(slow)).isZero();
        assertThat(effects(other)).as("the next message applied").isEqualTo(1);
        assertThat(halts() - halts).as("no halt").isZero();
    }

    private double halts() {
        Counter counter =
                this.meterRegistry.find(MicrometerIdempotencyMetrics.HALTS).counter();
        return counter != null ? counter.count() : 0;
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
