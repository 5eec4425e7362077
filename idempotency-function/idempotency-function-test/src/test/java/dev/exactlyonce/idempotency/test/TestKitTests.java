package dev.exactlyonce.idempotency.test;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.KitTestApplication.KitHappened;
import java.time.Instant;
import java.util.UUID;
import java.util.function.Function;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The test kit on a small guarded service: what it checks for a test, and what it refuses rather than let a test pass
 * on nothing.
 */
@SpringBootTest
@EnableIdempotencyTestKit
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class TestKitTests {

    private static final String FUNCTION = "recordKit";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("kit").registerDataSource(registry);
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
    TransactionTemplate transactions;

    @Autowired
    Function<KitHappened, OutgoingEvent> recordKit;

    @Test
    void theProbeRefusesANameItDoesNotWatch() {
        assertThatIllegalArgumentException()
                .isThrownBy(() -> this.probe.invocations("recordKitt"))
                .withMessageContaining("No business function named 'recordKitt' is watched")
                .withMessageContaining("[recordKit]");
        assertThatIllegalArgumentException().isThrownBy(() -> this.probe.failNext("recordKitt", 1));
        assertThatIllegalArgumentException().isThrownBy(() -> this.probe.pauseNext("recordKitt"));
    }

    @Test
    void anInjectedFailureFailsTheCommitAfterTheOutboxRowsWereWrittenAndRollsThemBack() {
        EventEnvelope<KitHappened> kit = kit();
        Long positionBefore = outboxPosition();
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliver(kit);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(this.recorder.attempts(kit.eventId()))
                .singleElement()
                .satisfies(attempt -> assertThat(attempt.failure()).isInstanceOf(InjectedFailure.class));
        assertThat(outboxPosition())
                .as("the attempt wrote its event to the outbox before its commit failed")
                .isNotEqualTo(positionBefore);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = ?",
                        Integer.class,
                        kit.payload().kitId().toString()))
                .as("and the rollback took it back")
                .isZero();
        assertThat(effects(kit)).isZero();
        assertThat(this.processedEvents.rows(kit.eventId())).isZero();
    }

    @Test
    void aFailureInjectedIntoACallOutsideADeliveryThrowsAtOnceAndLeavesNothingBehind() {
        EventEnvelope<KitHappened> kit = kit();
        this.probe.failNext(FUNCTION, 1);

        assertThatExceptionOfType(InjectedFailure.class)
                .isThrownBy(() -> this.transactions.executeWithoutResult(
                        status -> this.recordKit.apply(new KitHappened(UUID.randomUUID()))));

        this.deliveries.deliver(kit);
        assertThat(effects(kit))
                .as("the next delivery is not failed by what the call left")
                .isEqualTo(1);
    }

    @Test
    void anActionAfterACommitThatNeverCameFailsTheTest() {
        this.recorder.afterCommit(UuidV7.generate(), () -> {});

        assertThatIllegalStateException()
                .isThrownBy(this.recorder::reset)
                .withMessageContaining("never ran: no attempt at them committed");
    }

    @Test
    @Order(1)
    void aFailedDeliveryLeavesItsErrorForItsOwnTest() {
        this.deliveries.deliverBody("not json".getBytes(UTF_8));

        assertThat(this.deliveries.lastError()).isNotNull();
    }

    @Test
    @Order(2)
    void theNextTestStartsWithoutTheErrorOfThePreviousOne() {
        assertThat(this.deliveries.lastError())
                .as("the last error, reset before each test")
                .isNull();
    }

    private EventEnvelope<KitHappened> kit() {
        return new EventEnvelope<>(
                UuidV7.generate(), KitHappened.NAME, Instant.now(), new KitHappened(UUID.randomUUID()));
    }

    private int effects(EventEnvelope<KitHappened> kit) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM kit_effect WHERE kit_id = ?",
                Integer.class,
                kit.payload().kitId());
        return count != null ? count : 0;
    }

    /** The last position the outbox handed out, taken back or not (a sequence is not rolled back). */
    private Long outboxPosition() {
        return this.jdbcTemplate.queryForObject(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence('outbox_event', 'position'))", Long.class);
    }

    /** The recorder on a service that reads event ids from a header, around a bare payload. */
    @Nested
    @SpringBootTest(properties = {"idempotency.event-id.source=header", "spring.application.name=kit-header-tests"})
    class WithTheEventIdInAHeader {

        @Autowired
        EventDeliveries deliveries;

        @Autowired
        DeliveryRecorder recorder;

        @Test
        void theRecorderFollowsEventsByTheIdTheGuardReads() {
            UUID eventId = UuidV7.generate();

            this.deliveries.deliverMessage(
                    MessageBuilder.withPayload(("{\"kitId\": \"" + UUID.randomUUID() + "\"}").getBytes(UTF_8))
                            .setHeader("event_id", eventId.toString())
                            .setHeader("event_name", KitHappened.NAME)
                            .setHeader("contentType", "application/json")
                            .build());

            assertThat(this.recorder.attempts(eventId))
                    .singleElement()
                    .satisfies(attempt -> assertThat(attempt.failure()).isNull());
        }
    }
}
