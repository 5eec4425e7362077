package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The guard on the real path: test binder, transaction per message, guard and business function together, against
 * PostgreSQL. The binding retries once ({@code max-attempts: 2}).
 */
@SpringBootTest
@EnableIdempotencyTestKit
class GuardThroughTheBinderTests {

    private static final String FUNCTION = "recordThing";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("guard").registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @AfterEach
    void reset() {
        this.probe.reset();
    }

    @Test
    void deliveringTheSameEventTwiceAppliesItOnce() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 2);

        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
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
