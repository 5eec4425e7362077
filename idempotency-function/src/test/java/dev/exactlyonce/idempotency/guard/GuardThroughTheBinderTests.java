package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The guard on the real path: test binder, transaction per message, guard and business function together, against
 * PostgreSQL. The binding retries once ({@code max-attempts: 2}).
 */
@SpringBootTest
@EnableIdempotencyTestKit
class GuardThroughTheBinderTests {

    private static final String FUNCTION = "recordThing";

    private static final TestDatabase database = TestPostgres.newDatabase("guard");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    TransactionTemplate transactionTemplate;

    @Autowired
    PlatformTransactionManager transactionManager;

    @Autowired
    GuardInstaller guardedBindings;

    @Autowired
    DataSource dataSource;

    @AfterEach
    void reset() {
        this.probe.reset();
        this.deliveries.resetLastError();
    }

    @Test
    void deliveringTheSameEventTwiceAppliesItOnce() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 2);

        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(this.deliveries.lastError())
                .as("the copy's claim raised no error (a unique violation would abort its transaction)")
                .isNull();
    }

    @Test
    void aDuplicateDoesNotCallTheBusinessFunctionAtAll() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.deliveries.deliver(event);
        this.probe.reset();

        this.deliveries.deliver(event, 3);

        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(effects(event)).isEqualTo(1);
    }

    /**
     * A commit PostgreSQL refuses (a deferred constraint, checked at {@code COMMIT}): the claim and the effect roll back
     * with it, and the retry, whose commit goes through, applies the event once. The trigger fails the first commit
     * only: a sequence counts commits, and a sequence's value survives a rollback.
     */
    @Test
    void aCommitThePostgresRefusesRollsBackTheClaimAndTheRetryAppliesTheEventOnce() {
        EventEnvelope<ThingHappened> event = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), new BigDecimal("13.013")));
        this.jdbcTemplate.execute("CREATE SEQUENCE first_commit_fails");
        this.jdbcTemplate.execute("""
                CREATE FUNCTION first_commit_fails() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF nextval('first_commit_fails') = 1 THEN
                        RAISE EXCEPTION 'the first commit fails (injected by the test)';
                    END IF;
                    RETURN NULL;
                END $$""");
        this.jdbcTemplate.execute("""
                CREATE CONSTRAINT TRIGGER first_commit_fails AFTER INSERT ON thing_effect
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.amount = 13.013)
                EXECUTE FUNCTION first_commit_fails()""");
        try {
            this.deliveries.deliver(event);
        } finally {
            this.jdbcTemplate.execute("DROP TRIGGER first_commit_fails ON thing_effect");
            this.jdbcTemplate.execute("DROP FUNCTION first_commit_fails()");
            this.jdbcTemplate.execute("DROP SEQUENCE first_commit_fails");
        }

        assertThat(this.recorder.attempts(event.eventId()))
                .as("the attempt whose commit failed, then the retry")
                .satisfiesExactly(
                        refused -> assertThat(refused.failure())
                                .hasStackTraceContaining("the first commit fails (injected by the test)"),
                        retry -> assertThat(retry.failure()).isNull());
        assertThat(this.deliveries.lastError()).isNull();
        assertThat(committedEffects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    @Test
    void aFailingBusinessFunctionLeavesNoClaimAndTheNextDeliveryAppliesTheEventOnce() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.probe.failNext(FUNCTION, 2);

        this.deliveries.deliver(event);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(2);
        assertThat(effects(event)).isZero();
        assertThat(this.processedEvents.rows(event.eventId())).isZero();

        this.deliveries.deliver(event);

        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    @Test
    void eachRetryAttemptRunsInATransactionOfItsOwn() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliver(event);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(2);
        assertThat(effects(event))
                .as("the first attempt's insert was rolled back")
                .isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    @Test
    void aSecondDeliveryWaitsForTheFirstTransactionAndIsDiscardedWhenItCommits() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> first = this.deliveries.deliverAsync(event);
        pause.awaitReached();

        CompletableFuture<Void> second = this.deliveries.deliverAsync(event);
        awaitBlockedClaim();
        pause.release();
        CompletableFuture.allOf(first, second).join();

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    @Test
    void aSecondDeliveryWaitsForTheFirstTransactionAndAppliesTheEventWhenItRollsBack() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> first = this.deliveries.deliverAsync(event);
        pause.awaitReached();

        CompletableFuture<Void> second = this.deliveries.deliverAsync(event);
        awaitBlockedClaim();
        pause.releaseWithFailure();
        CompletableFuture.allOf(first, second).join();

        assertThat(this.probe.invocations(FUNCTION))
                .as("the rolled-back run, then the waiting delivery")
                .isEqualTo(2);
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    @Test
    void copiesDeliveredOnManyThreadsAtOnceApplyTheEventOnce() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliverConcurrently(event, 8);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(effects(event)).isEqualTo(1);
    }

    @Test
    void anErrorThrownByTheBusinessFunctionRollsBackAndTheRetryAppliesTheEventOnce() {
        EventEnvelope<ThingHappened> first = Things.thingHappened();
        EventEnvelope<ThingHappened> second = Things.thingHappened();
        this.probe.failNextWith(FUNCTION, new AssertionError("an assertion in the business function failed"));

        this.deliveries.deliver(first);
        this.deliveries.deliver(second);

        assertThat(this.probe.invocations(FUNCTION))
                .as("the attempt that threw, its retry, the second event")
                .isEqualTo(3);
        assertThat(this.deliveries.lastError()).isNull();
        assertThat(committedEffects(first))
                .as("seen from another connection, after the retry")
                .isEqualTo(1);
        assertThat(committedEffects(second))
                .as("the next message committed in a transaction of its own")
                .isEqualTo(1);
    }

    /**
     * A business function whose statement breaks a rule of the database (SQLSTATE class 23, a check constraint here)
     * meets it again on every attempt with the same data: dead-lettered after one attempt, not retried.
     */
    @Test
    void aStatementThatBreaksAConstraintIsDeadLetteredWithoutARetry() {
        EventEnvelope<ThingHappened> breaking = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), new BigDecimal("666.000")));
        this.jdbcTemplate.execute("ALTER TABLE thing_effect ADD CONSTRAINT no_666 CHECK (amount <> 666)");
        try {
            this.deliveries.deliver(breaking);
        } finally {
            this.jdbcTemplate.execute("ALTER TABLE thing_effect DROP CONSTRAINT no_666");
        }

        assertThat(this.deliveries.lastError()).as("dead-lettered").isNotNull();
        assertThat(this.probe.invocations(FUNCTION))
                .as("one attempt, of max-attempts 2")
                .isEqualTo(1);
        assertThat(this.processedEvents.rows(breaking.eventId())).isZero();
    }

    @Test
    void anErrorOnEveryAttemptDeadLettersTheEventWithTheErrorAndLeavesTheThreadClean() {
        EventEnvelope<ThingHappened> failing = Things.thingHappened();
        EventEnvelope<ThingHappened> next = Things.thingHappened();
        this.probe.failNextWith(FUNCTION, new StackOverflowError());
        this.probe.failNextWith(FUNCTION, new StackOverflowError());

        this.deliveries.deliver(failing);

        assertThat(this.deliveries.lastError()).isNotNull();
        assertThat(((ErrorMessage) this.deliveries.lastError()).getPayload().getCause())
                .hasMessage("recordThing threw java.lang.StackOverflowError");
        assertThat(TransactionSynchronizationManager.isActualTransactionActive())
                .isFalse();
        assertThat(committedEffects(failing)).isZero();

        this.deliveries.deliver(next);

        assertThat(committedEffects(next)).isEqualTo(1);
    }

    @Test
    void aTransactionAnEarlierMessageLeftOpenOnTheThreadIsRolledBackBeforeTheNextMessage() {
        EventEnvelope<ThingHappened> abandoned = Things.thingHappened();
        EventEnvelope<ThingHappened> next = Things.thingHappened();
        // What an invocation leaves on the consumer thread when a Throwable escapes every catch of the channel: its
        // transaction, with the event's effect written, and the invocation itself, still bound.
        TransactionStatus transaction = this.transactionManager.getTransaction(new DefaultTransactionDefinition());
        MessageTransaction.open(
                this.guardedBindings.bindings().get(0),
                this.transactionManager,
                transaction,
                null,
                null,
                new MessageTransaction.Recovery() {
                    @Override
                    public TransactionStatus beginAgain(TransactionStatus failed, RuntimeException failure) {
                        throw failure;
                    }

                    @Override
                    public RuntimeException thrown(RuntimeException failure) {
                        return failure;
                    }
                });
        this.jdbcTemplate.update(
                "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)",
                abandoned.payload().thingId(),
                abandoned.payload().amount());

        this.deliveries.deliver(next);

        assertThat(committedEffects(next))
                .as("the next message committed in a transaction of its own")
                .isEqualTo(1);
        assertThat(committedEffects(abandoned))
                .as("the abandoned transaction rolled back, not committed with the next message")
                .isZero();
        assertThat(transaction.isCompleted()).isTrue();
        assertThat(MessageTransaction.current()).isNull();
        assertThat(TransactionSynchronizationManager.isActualTransactionActive())
                .isFalse();
    }

    @Test
    void aMessageDeliveredInsideATransactionOfTheCallerIsRefusedRatherThanJoinIt() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.transactionTemplate.executeWithoutResult(status -> this.deliveries.deliver(event));

        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(((ErrorMessage) this.deliveries.lastError()).getPayload().getCause())
                .hasMessageContaining("already runs a transaction");
        assertThat(committedEffects(event)).isZero();
    }

    /** The effects of the event committed, read on a connection of its own, outside any transaction of the test. */
    private int committedEffects(EventEnvelope<ThingHappened> event) {
        try (Connection connection = this.dataSource.getConnection();
                PreparedStatement statement =
                        connection.prepareStatement("SELECT count(*) FROM thing_effect WHERE thing_id = ?")) {
            statement.setObject(1, event.payload().thingId());
            try (ResultSet result = statement.executeQuery()) {
                result.next();
                return result.getInt(1);
            }
        } catch (SQLException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private void awaitBlockedClaim() {
        await().atMost(Duration.ofSeconds(10)).until(() -> this.processedEvents.blockedClaims() == 1);
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        UUID thingId = event.payload().thingId();
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?", Integer.class, thingId);
        return count != null ? count : 0;
    }
}
