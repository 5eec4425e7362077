package dev.exactlyonce.idempotency;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
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

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("batch").registerDataSource(registry);
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
    void aPoisonMessageRejectsItsWholeBatchWithoutRetry() {
        EventEnvelope<ThingHappened> valid = Things.thingHappened();

        this.deliveries.deliverBatchBodies(List.of(new EnvelopeCodec().encode(valid), "hello".getBytes(UTF_8)));

        assertThat(effects(valid)).isZero();
        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(((ErrorMessage) this.deliveries.lastError())
                        .getPayload()
                        .getCause()
                        .getMessage())
                .startsWith("NOT_JSON: ");
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
