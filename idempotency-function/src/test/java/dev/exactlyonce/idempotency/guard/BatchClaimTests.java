package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.slf4j.MDC;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A batch binding: the guard claims the whole batch with one statement and hands the business function the payloads
 * of first deliveries only, each once, in one transaction with it.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThings",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.destination=things",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.group=batches",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.batch-mode=true",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.max-attempts=2",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThings-in-0.consumer.back-off-initial-interval=1"
        })
@EnableIdempotencyTestKit
class BatchClaimTests {

    private static final String FUNCTION = "recordThings";

    private static final TestDatabase database = TestPostgres.newDatabase("batch");

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
    MeterRegistry meterRegistry;

    @Autowired
    DataSource dataSource;

    @Autowired
    DeliveryRecorder recorder;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.of(IdempotencyGuard.class);

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
        this.recorder.reset();
        this.deliveries.resetLastError();
    }

    @Test
    void deliveringTheSameBatchTwiceAppliesEachEventOnce() {
        List<EventEnvelope<ThingHappened>> batch =
                List.of(Things.thingHappened(), Things.thingHappened(), Things.thingHappened());

        this.deliveries.deliverBatch(batch);
        this.deliveries.deliverBatch(batch);

        assertThat(batch).allSatisfy(event -> {
            assertThat(effects(event)).isEqualTo(1);
            assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        });
        assertThat(this.probe.invocations(FUNCTION))
                .as("the second batch had nothing new")
                .isEqualTo(1);
    }

    @Test
    void copiesInsideOneBatchAreAppliedOnce() {
        EventEnvelope<ThingHappened> a = Things.thingHappened();
        EventEnvelope<ThingHappened> b = Things.thingHappened();

        this.deliveries.deliverBatch(List.of(a, b, a, a, b));

        assertThat(effects(a)).isEqualTo(1);
        assertThat(effects(b)).isEqualTo(1);
    }

    @Test
    void aBatchMixingNewAndProcessedEventsAppliesTheNewOnesOnly() {
        EventEnvelope<ThingHappened> processed = Things.thingHappened();
        EventEnvelope<ThingHappened> fresh = Things.thingHappened();
        this.deliveries.deliverBatch(List.of(processed));

        this.deliveries.deliverBatch(List.of(processed, fresh));

        assertThat(effects(processed)).isEqualTo(1);
        assertThat(effects(fresh)).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(2);
    }

    @Test
    void aFailureRollsTheWholeBatchBackAndTheNextDeliveryAppliesIt() {
        List<EventEnvelope<ThingHappened>> batch = List.of(Things.thingHappened(), Things.thingHappened());
        this.probe.failNext(FUNCTION, 2);

        this.deliveries.deliverBatch(batch);

        assertThat(batch).allSatisfy(event -> {
            assertThat(effects(event)).isZero();
            assertThat(this.processedEvents.rows(event.eventId())).isZero();
        });

        this.deliveries.deliverBatch(batch);

        assertThat(batch).allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
    }

    @Test
    void overlappingBatchesAtOnceApplyEachEventOnce() {
        EventEnvelope<ThingHappened> a = Things.thingHappened();
        EventEnvelope<ThingHappened> b = Things.thingHappened();
        EventEnvelope<ThingHappened> c = Things.thingHappened();
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> first = this.deliveries.deliverBatchAsync(List.of(a, b));
        pause.awaitReached();

        CompletableFuture<Void> second = this.deliveries.deliverBatchAsync(List.of(b, c));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.processedEvents.blockedClaims() == 1);
        pause.release();
        CompletableFuture.allOf(first, second).join();

        assertThat(List.of(a, b, c))
                .allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
    }

    @Test
    void batchesClaimingTheSameIdsInOppositeOrdersWhileAThirdTransactionHoldsOneDoNotDeadlock() throws Exception {
        List<EventEnvelope<ThingHappened>> ordered = Stream.generate(Things::thingHappened)
                .limit(3)
                .sorted(Comparator.comparing(event -> event.eventId().toString()))
                .toList();
        EventEnvelope<ThingHappened> a = ordered.get(0);
        EventEnvelope<ThingHappened> k = ordered.get(1);
        EventEnvelope<ThingHappened> b = ordered.get(2);
        CompletableFuture<Void> first;
        CompletableFuture<Void> second;
        try (Connection holder = this.dataSource.getConnection()) {
            holder.setAutoCommit(false);
            try (PreparedStatement claim = holder.prepareStatement(
                    "INSERT INTO processed_event (event_id, scope, event_name) VALUES (?, '', ?)")) {
                claim.setObject(1, k.eventId());
                claim.setString(2, k.eventName());
                claim.executeUpdate();
            }
            first = this.deliveries.deliverBatchAsync(List.of(a, k, b));
            awaitBlockedClaims(1);
            second = this.deliveries.deliverBatchAsync(List.of(b, a));
            awaitBlockedClaims(2);
            holder.rollback();
        }
        CompletableFuture.allOf(first, second).join();

        assertThat(this.recorder.attempts())
                .as("one attempt per batch (an attempt at each of its messages), none failed (a deadlock would fail"
                        + " one with 40P01)")
                .hasSize(5)
                .allSatisfy(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(List.of(a, k, b))
                .allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
    }

    @Test
    void theIdsOfABatchAreInTheMdcWhileTheBatchIsHandled() {
        EventEnvelope<ThingHappened> a = Things.thingHappened();
        EventEnvelope<ThingHappened> b = Things.thingHappened();

        this.deliveries.deliverBatch(List.of(a, b));

        assertThat(this.logs.events())
                .filteredOn(log -> log.getFormattedMessage().startsWith("Claimed"))
                .singleElement()
                .satisfies(log -> assertThat(log.getMDCPropertyMap())
                        .containsEntry("event_id", a.eventId() + "," + b.eventId())
                        .containsEntry("event_name", ThingHappened.NAME));
        assertThat(MDC.get("event_id")).isNull();
    }

    @Test
    void theCopiesOfABatchThatRollsBackAreNotCountedAsDuplicatesUntilItCommits() {
        EventEnvelope<ThingHappened> processed = Things.thingHappened();
        this.deliveries.deliverBatch(List.of(processed));
        double before = duplicates();
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliverBatch(List.of(processed, Things.thingHappened()));

        assertThat(this.probe.invocations(FUNCTION))
                .as("the first batch, the failed attempt, its retry")
                .isEqualTo(3);
        assertThat(duplicates() - before)
                .as("one copy, counted once: by the attempt that committed")
                .isEqualTo(1);
    }

    @Test
    void aPoisonMessageIsSetAsideWithoutRetryAndTheRestOfItsBatchIsApplied() {
        EventEnvelope<ThingHappened> valid = Things.thingHappened();

        this.deliveries.deliverBatchBodies(List.of(new EnvelopeCodec().encode(valid), "hello".getBytes(UTF_8)));

        assertThat(effects(valid)).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(batchAttempts(2)).as("no retry").isEqualTo(1);
        PartlyFailedBatch failed =
                Failures.find(((ErrorMessage) this.deliveries.lastError()).getPayload(), PartlyFailedBatch.class);
        assertThat(failed).isNotNull();
        assertThat(failed.failures()).containsOnlyKeys(1);
        assertThat(failed.failures().get(1).getMessage()).startsWith("NOT_JSON: ");
    }

    @Test
    void aMessageSetAsideIsCountedOnceThoughItsBatchRolledBackAndWasDeliveredAgain() {
        EventEnvelope<ThingHappened> valid = Things.thingHappened();
        this.probe.failNext(FUNCTION, 1);
        double before = rejectedNotJson();

        this.deliveries.deliverBatchBodies(List.of(new EnvelopeCodec().encode(valid), "hello".getBytes(UTF_8)));

        assertThat(batchAttempts(2))
                .as("the batch failed, then was delivered again")
                .isEqualTo(2);
        assertThat(effects(valid)).isEqualTo(1);
        assertThat(rejectedNotJson() - before)
                .as("counted when it goes to the dead-letter queue, not on each attempt")
                .isEqualTo(1);
    }

    private double rejectedNotJson() {
        Counter counter = this.meterRegistry
                .find(MicrometerIdempotencyMetrics.REJECTED)
                .tag("reason", "NOT_JSON")
                .counter();
        return counter != null ? counter.count() : 0;
    }

    /**
     * How many times a batch of that size was delivered: the recorder records an attempt at each of its messages, so
     * the attempts are a whole number of batches, or some message was attempted alone.
     */
    private int batchAttempts(int batchSize) {
        int attempts = this.recorder.attempts().size();
        assertThat(attempts % batchSize)
                .as("%d attempt(s) at messages: whole batches of %d", attempts, batchSize)
                .isZero();
        return attempts / batchSize;
    }

    private void awaitBlockedClaims(int claims) {
        await().atMost(Duration.ofSeconds(10)).until(() -> this.processedEvents.blockedClaims() == claims);
    }

    private double duplicates() {
        Counter counter = this.meterRegistry
                .find(MicrometerIdempotencyMetrics.DUPLICATES)
                .tag("function", FUNCTION)
                .counter();
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
