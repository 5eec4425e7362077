package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.InjectedFailure;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Messages that can never be processed fail once, without retry (the binding allows two attempts), leave nothing
 * behind, and reach the binder's dead-letter path with their real reason; the next message is processed normally.
 */
@SpringBootTest
@EnableIdempotencyTestKit
class RejectedMessagesTests {

    private static final String FUNCTION = "recordThing";

    private static final String EVENT_ID = "01937d6e-2a4c-7b1e-9f3a-5c2d1e0f4a8b";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("rejected").registerDataSource(registry);
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

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    @BeforeEach
    void reset() {
        this.probe.reset();
        this.recorder.reset();
        this.deliveries.resetLastError();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            a body that is not JSON       | hello                                                            | NOT_JSON
            an empty body                 |                                                                  | NOT_JSON
            JSON that is not an object    | [1, 2, 3]                                                        | NOT_AN_OBJECT
            no event_id                   | {"event_name": "test.thing.happened.v1", "payload": {}}          | MISSING_EVENT_ID
            no event_name                 | {"event_id": "%1$s", "payload": {}}                              | MISSING_FIELD
            no payload                    | {"event_id": "%1$s", "event_name": "test.thing.happened.v1"}     | MISSING_FIELD
            an event_id that is no UUID   | {"event_id": "order-42", "event_name": "test.thing.happened.v1", "payload": {}} | INVALID_EVENT_ID
            an event nobody handles       | {"event_id": "%1$s", "event_name": "test.other.v1", "payload": {}} | UNKNOWN_EVENT
            a thing id that is no UUID    | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "t-1", "amount": "1"}} | INVALID_PAYLOAD
            an amount that is no decimal  | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": "ten"}} | INVALID_PAYLOAD
            a missing amount              | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s"}} | INVALID_PAYLOAD
            an amount of 10^100000000     | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": 1e100000000}} | INVALID_PAYLOAD
            the same amount as a string   | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": "1e100000000"}} | INVALID_PAYLOAD
            a tiny amount as a string     | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": "1e-100000000"}} | INVALID_PAYLOAD
            an amount of 101 digits       | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": 12345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901}} | INVALID_PAYLOAD
            a huge number anywhere        | {"event_id": "%1$s", "event_name": "test.thing.happened.v1", "payload": {"thingId": "%1$s", "amount": "1", "note": -1E+999999999}} | INVALID_PAYLOAD
            """)
    void aPoisonMessageFailsOnceWithItsReasonAndTheNextMessageIsProcessed(String kind, String body, String reason) {
        this.deliveries.deliverBody((body == null ? "" : body.formatted(EVENT_ID)).getBytes(UTF_8));

        assertThat(this.recorder.attempts()).as("attempts").hasSize(1);
        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(this.processedEvents.rows(UUID.fromString(EVENT_ID))).isZero();
        assertThat(deadLetteredReason()).startsWith(reason + ": ");

        EventEnvelope<ThingHappened> next = Things.thingHappened();
        this.deliveries.deliver(next);

        assertThat(effects(next)).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
    }

    @Test
    void aPayloadRejectionSaysWhichFieldAndKeepsTheEventId() {
        this.deliveries.deliverBody("""
                {"event_id": "%1$s", "event_name": "test.thing.happened.v1",
                 "payload": {"thingId": "%1$s", "amount": "ten"}}""".formatted(EVENT_ID).getBytes(UTF_8));

        assertThat(deadLetteredReason())
                .startsWith("INVALID_PAYLOAD: the payload of test.thing.happened.v1 does not map to ThingHappened")
                .contains("at payload.amount");
    }

    /**
     * A payload's field names and values reach the rejection (Jackson's message quotes them), which goes into the
     * dead letter's {@code x-exception-message}, the WARN line and the operator's terminal: escaped, one line.
     */
    @Test
    void aPayloadRejectionQuotesTheMessagesTextEscaped() {
        this.logs.clear();

        this.deliveries.deliverBody("""
                {"event_id": "%1$s", "event_name": "test.thing.happened.v1",
                 "payload": {"thingId": "not\\r\\n2026-12-01 ERROR forged\\u001b[2J", "amount": 1}}""".formatted(EVENT_ID).getBytes(UTF_8));

        assertThat(deadLetteredReason())
                .startsWith("INVALID_PAYLOAD: ")
                .doesNotContain("\n", "\r", "\u001b")
                .contains("\\u000a");
        assertThat(this.logs.eventsOfThisThread())
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .isNotEmpty()
                .allSatisfy(log -> assertThat(log.getFormattedMessage()).doesNotContain("\n", "\r", "\u001b"));
        // The stack trace, as the Rabbit binder's republisher writes it into x-exception-stacktrace: its causes too.
        java.io.StringWriter trace = new java.io.StringWriter();
        ((ErrorMessage) this.deliveries.lastError()).getPayload().printStackTrace(new java.io.PrintWriter(trace));
        assertThat(trace.toString())
                .doesNotContain("\r", "\u001b")
                .doesNotContainPattern("(?m)^2026-12-01 ERROR forged");
    }

    @Test
    void aBodyOverTheSizeLimitIsRejectedUnparsed() {
        String note = "x".repeat(4 * 1024 * 1024);
        this.deliveries.deliverBody("""
                {"event_id": "%1$s", "event_name": "test.thing.happened.v1",
                 "payload": {"thingId": "%1$s", "amount": "1", "note": "%2$s"}}""".formatted(EVENT_ID, note).getBytes(UTF_8));

        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(deadLetteredReason())
                .startsWith("INVALID_PAYLOAD: the message body is 4194")
                .contains("idempotency.payload.max-size");
    }

    @Test
    void aTransientFailureIsRetriedThenDeadLetteredWithItsOwnMessage() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.probe.failNext(FUNCTION, 2);

        this.deliveries.deliver(event);

        assertThat(this.recorder.attempts(event.eventId())).hasSize(2);
        assertThat(deadLetteredReason()).isEqualTo("failure injected by the test after recordThing ran");
        assertThat(this.processedEvents.rows(event.eventId())).isZero();
        assertThat(effects(event)).isZero();
    }

    @Test
    void aRejectionLogsOneWarningAndNothingAtError() {
        this.logs.clear();

        this.deliveries.deliverBody("hello".getBytes(UTF_8));

        assertThat(this.logs.eventsOfThisThread())
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .singleElement()
                .satisfies(log -> {
                    assertThat(log.getLevel()).isEqualTo(Level.WARN);
                    assertThat(log.getFormattedMessage())
                            .startsWith("Rejected a message of idempotencyGuardrecordThing-in-0 without retry,"
                                    + " event id unknown: NOT_JSON: ");
                    assertThat(log.getThrowableProxy()).as("no stack trace").isNull();
                });
    }

    @Test
    void aFailureThatIsNotARejectionLogsItsStackTraceOnceAtError() {
        this.logs.clear();
        this.probe.failNext(FUNCTION, 2);

        this.deliveries.deliver(Things.thingHappened());

        assertThat(this.logs.eventsOfThisThread())
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.ERROR))
                .singleElement()
                .satisfies(log -> assertThat(log.getFormattedMessage())
                        .as("Spring Integration's error logger writes the stack trace into the line")
                        .contains(InjectedFailure.class.getName())
                        .contains("\tat "));
    }

    @Test
    void aDuplicateLogsNothingAboveDebug() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.deliveries.deliver(event);
        this.logs.clear();

        this.deliveries.deliver(event, 3);

        assertThat(this.logs.eventsOfThisThread())
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.INFO))
                .isEmpty();
    }

    /** What the Rabbit and Kafka binders record as {@code x-exception-message}: the message of the cause. */
    private String deadLetteredReason() {
        Message<?> error = this.deliveries.lastError();
        assertThat(error).as("the binder gave up on the message").isInstanceOf(ErrorMessage.class);
        Throwable failure = ((ErrorMessage) error).getPayload();
        return failure.getCause() != null ? failure.getCause().getMessage() : failure.getMessage();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
