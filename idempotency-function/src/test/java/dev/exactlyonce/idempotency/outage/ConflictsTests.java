package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Conflicts with other transactions, made for real on PostgreSQL: the business function's insert waits for a table
 * lock that another transaction holds, past the service's {@code lock_timeout} (55P03). That is not the message's
 * fault: the message is given back and tried again, its attempts not spent, while the conflict lasts, up to
 * {@code idempotency.conflicts.max-give-backs}; a message whose every attempt conflicts still reaches the dead-letter
 * queue after that. The binding allows two attempts.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-init-sql=SET lock_timeout = '200ms'",
            "idempotency.conflicts.max-give-backs=4",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
class ConflictsTests {

    private static final TestDatabase database = TestPostgres.newDatabase("conflicts");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ProcessedEvents processedEvents;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aMessageThatConflictsWhileAnotherTransactionHoldsALockIsAppliedOnceItEnds() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        CompletableFuture<Void> delivery;
        try (Connection holder = lockThingEffect()) {
            delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(30));
            await().atMost(Duration.ofSeconds(10))
                    .alias("more attempts than the binding's two, each waiting 200 ms for the lock")
                    .until(() -> this.recorder.attempts(event.eventId()).size() > 2);
            holder.rollback();
        }
        delivery.get(30, TimeUnit.SECONDS);

        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(this.recorder.attempts(event.eventId()))
                .as("more attempts than the binding's two, all but the last a conflict")
                .hasSizeGreaterThan(2)
                .last()
                .satisfies(attempt -> assertThat(attempt.failure()).isNull());
    }

    @Test
    void aMessageWhoseEveryAttemptConflictsIsDeadLetteredAfterTheBound() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        try (Connection holder = lockThingEffect()) {
            this.deliveries.deliverUntilTaken(event, Duration.ofSeconds(30));
            holder.rollback();
        }

        assertThat(this.deliveries.lastError())
                .isInstanceOfSatisfying(
                        ErrorMessage.class,
                        error -> assertThat(error.getPayload()).hasStackTraceContaining("lock timeout"));
        assertThat(this.recorder.attempts(event.eventId()))
                .as("the binding's two attempts on the delivery, then one on each of the four tries after a back-off")
                .hasSize(6)
                .allSatisfy(attempt -> assertThat(attempt.failure()).hasStackTraceContaining("lock timeout"));
        assertThat(effects(event)).isZero();
    }

    /**
     * The first attempt conflicts (the lock held), the second fails for the message's own reason (an amount too large
     * for its column, 22003): the message is dead-lettered after its two attempts, as any message failing on its own
     * is. The earlier attempt's conflict, which the retry keeps as a suppressed exception of the last failure, does
     * not make the last failure a conflict, given back and tried again.
     */
    @Test
    void aMessageThatConflictedOnceThenFailsOnItsOwnIsDeadLetteredAfterItsAttempts() throws Exception {
        EventEnvelope<ThingHappened> event = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), new BigDecimal("1000000000000")));
        CompletableFuture<Void> delivery;
        try (Connection holder = lockThingEffect()) {
            delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(30));
            await().atMost(Duration.ofSeconds(10))
                    .until(() -> !this.recorder.attempts(event.eventId()).isEmpty());
            // Before the second attempt, a second later.
            holder.rollback();
        }
        delivery.get(30, TimeUnit.SECONDS);

        assertThat(this.recorder.attempts(event.eventId()))
                .as("the binding's two attempts: a conflict, then the message's own failure")
                .hasSize(2)
                .satisfies(attempts -> {
                    assertThat(attempts.get(0).failure()).hasStackTraceContaining("lock timeout");
                    assertThat(attempts.get(1).failure()).hasStackTraceContaining("numeric field overflow");
                });
        assertThat(this.deliveries.lastError())
                .isInstanceOfSatisfying(
                        ErrorMessage.class,
                        error -> assertThat(error.getPayload()).hasStackTraceContaining("numeric field overflow"));
    }

    /** A transaction of another client that holds a lock on the table the business function writes to. */
    private static Connection lockThingEffect() throws Exception {
        Connection holder = DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password());
        holder.setAutoCommit(false);
        try (Statement statement = holder.createStatement()) {
            statement.execute("LOCK TABLE thing_effect IN EXCLUSIVE MODE");
        }
        return holder;
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
