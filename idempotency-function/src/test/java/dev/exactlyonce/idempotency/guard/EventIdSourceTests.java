package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.binder.rabbit.TestBinderDeliversAsRabbit;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The event id read from headers around a bare payload, per {@code idempotency.event-id.source}. */
class EventIdSourceTests {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("eventid").registerDataSource(registry);
    }

    abstract static class Deliveries {

        @Autowired
        EventDeliveries deliveries;

        @Autowired
        BusinessFunctionProbe probe;

        @Autowired
        ProcessedEvents processedEvents;

        @Autowired
        JdbcTemplate jdbcTemplate;

        final UUID thingId = UUID.randomUUID();

        @AfterEach
        void reset() {
            this.probe.reset();
            this.deliveries.resetLastError();
        }

        Message<byte[]> payloadWith(Map<String, Object> headers) {
            return MessageBuilder.withPayload("""
                            {"thingId": "%s", "amount": "1.250"}""".formatted(this.thingId).getBytes(UTF_8))
                    .copyHeaders(headers)
                    .build();
        }

        int effects() {
            Integer count = this.jdbcTemplate.queryForObject(
                    "SELECT count(*) FROM thing_effect WHERE thing_id = ?", Integer.class, this.thingId);
            return count != null ? count : 0;
        }

        String deadLetteredReason() {
            Throwable failure = ((ErrorMessage) this.deliveries.lastError()).getPayload();
            return failure.getCause().getMessage();
        }
    }

    @Nested
    @SpringBootTest(properties = "idempotency.event-id.source=header")
    @EnableIdempotencyTestKit
    class FromAHeader extends Deliveries {

        @Test
        void headerValuesThatArriveAsBytesAreReadAsUtf8() {
            UUID eventId = UUID.randomUUID();
            Message<byte[]> message = payloadWith(Map.of(
                    "event_id", eventId.toString().getBytes(UTF_8),
                    "event_name", ThingHappened.NAME.getBytes(UTF_8)));

            this.deliveries.deliverMessage(message);
            this.deliveries.deliverMessage(message);

            assertThat(this.deliveries.lastError()).as("no copy was rejected").isNull();
            assertThat(effects()).isEqualTo(1);
            assertThat(this.processedEvents.rows(eventId)).isEqualTo(1);
        }

        @Test
        void aMessageWithoutTheHeaderIsRejected() {
            this.deliveries.deliverMessage(payloadWith(Map.of("event_name", ThingHappened.NAME)));

            assertThat(effects()).isZero();
            assertThat(this.probe.invocations("recordThing")).isZero();
            assertThat(deadLetteredReason())
                    .isEqualTo("MISSING_EVENT_ID: the message has no event id (header event_id)");
        }
    }

    @Nested
    @SpringBootTest(properties = "idempotency.event-id.source=message-id")
    @EnableIdempotencyTestKit
    @Import(TestBinderDeliversAsRabbit.class)
    class FromTheAmqpMessageId extends Deliveries {

        @RegisterExtension
        final CapturedLogs logs = CapturedLogs.of(RecordedDeadLetters.class);

        @Test
        void theMessageIdPropertyAndTheRoutingKeyIdentifyTheEvent() {
            UUID eventId = UUID.randomUUID();
            Message<byte[]> message = payloadWith(
                    Map.of("amqp_messageId", eventId.toString(), "amqp_receivedRoutingKey", ThingHappened.NAME));

            this.deliveries.deliverMessage(message);
            this.deliveries.deliverMessage(message);

            assertThat(this.deliveries.lastError()).as("no copy was rejected").isNull();
            assertThat(effects()).isEqualTo(1);
            assertThat(this.processedEvents.rows(eventId)).isEqualTo(1);
        }

        /**
         * A message moved back to its queue (through the default exchange) carries no route the broker vouches for:
         * the headers that record a first route are a publisher's to write, and the broker keeps them on a message it
         * dead-letters itself. The service never dead-lettered this one, so it refuses it.
         */
        @ParameterizedTest
        @ValueSource(strings = {"x-original-routingKey", "x-death"})
        void aMessageMovedBackToItsQueueThatTheServiceNeverDeadLetteredIsRefusedWhateverItsHeadersRecord(
                String recordedBy) {
            Map<String, Object> recorded = recordedBy.equals("x-death")
                    ? Map.of(
                            "x-death",
                            List.of(
                                    Map.of("exchange", "", "routing-keys", List.of("things.queue")),
                                    Map.of("exchange", "events", "routing-keys", List.of(ThingHappened.NAME))))
                    : Map.of("x-original-exchange", "events", "x-original-routingKey", ThingHappened.NAME);
            Map<String, Object> headers = new HashMap<>(recorded);
            headers.putAll(movedBack(UUID.randomUUID()));

            this.deliveries.deliverMessage(payloadWith(headers));

            assertThat(deadLetteredReason()).startsWith("UNRECORDED_DEAD_LETTER: ");
            assertThat(effects()).isZero();
        }

        /**
         * A message the service dead-lettered (its function failed every attempt), moved back to its queue with the
         * name the replay gives it ({@code event_name}, from the routing key it first came by): taken, and applied.
         */
        @Test
        void aDeadLetterTheServiceDeadLetteredIsTakenBackWhenMovedBackToItsQueue() {
            UUID eventId = UUID.randomUUID();
            this.probe.failNext("recordThing", 2);
            this.deliveries.deliverMessage(payloadWith(published(eventId)));
            assertThat(this.deliveries.lastError()).as("dead-lettered").isNotNull();
            this.deliveries.resetLastError();

            this.deliveries.deliverMessage(payloadWith(movedBack(eventId)));

            assertThat(this.deliveries.lastError()).isNull();
            assertThat(effects()).isEqualTo(1);
        }

        /**
         * The record of a dead letter refused by the database for a reason of its own (a constraint of the table), not
         * an outage: said at ERROR, and the message dead-lettered all the same, rather than given back for ever; moved
         * back, it is refused, since nothing recorded it.
         */
        @Test
        void aDeadLetterWhoseRecordTheDatabaseRefusesIsDeadLetteredUnrecordedAndSaidSo() {
            UUID eventId = UUID.randomUUID();
            this.probe.failNext("recordThing", 2);
            this.jdbcTemplate.execute(
                    "ALTER TABLE processed_event_dead_letter ADD CONSTRAINT refused CHECK (false) NOT VALID");
            try {
                this.deliveries.deliverMessage(payloadWith(published(eventId)));
            } finally {
                this.jdbcTemplate.execute("ALTER TABLE processed_event_dead_letter DROP CONSTRAINT refused");
            }
            assertThat(this.deliveries.lastError()).as("dead-lettered").isNotNull();
            assertThat(this.logs.events())
                    .filteredOn(log -> log.getLevel() == Level.ERROR)
                    .extracting(log -> log.getFormattedMessage())
                    .anySatisfy(line -> assertThat(line)
                            .contains("Could not record a dead letter")
                            .contains("UNRECORDED_DEAD_LETTER"));
            this.deliveries.resetLastError();

            this.deliveries.deliverMessage(payloadWith(movedBack(eventId)));

            assertThat(deadLetteredReason()).startsWith("UNRECORDED_DEAD_LETTER: ");
            assertThat(effects()).isZero();
        }

        /** As the event's producer publishes it: to the exchange, under its name. */
        private static Map<String, Object> published(UUID eventId) {
            return Map.of(
                    "amqp_messageId",
                    eventId.toString(),
                    "amqp_receivedExchange",
                    "events",
                    "amqp_receivedRoutingKey",
                    ThingHappened.NAME);
        }

        /** As a replay moves a dead letter back: through the default exchange, with its event's name as a header. */
        private static Map<String, Object> movedBack(UUID eventId) {
            return Map.of(
                    "amqp_messageId", eventId.toString(),
                    "amqp_receivedExchange", "",
                    "amqp_receivedRoutingKey", "things.queue",
                    "amqp_consumerQueue", "things.queue",
                    "event_name", ThingHappened.NAME);
        }
    }

    /**
     * One route carrying CloudEvents of several types, as a Kafka topic per stream does: the binding declares which
     * event names the route may carry, and the route check holds a publisher of that route to them.
     */
    @Nested
    @SpringBootTest(
            properties = {
                "idempotency.event-id.source=cloudevents",
                "idempotency.bindings.idempotencyGuardrecordThing-in-0.routes[things.ce]=test.other.happened.v1,"
                        + ThingHappened.NAME
            })
    @EnableIdempotencyTestKit
    @Import(TestBinderDeliversAsRabbit.class)
    class FromCloudEventsOnARouteOfSeveralTypes extends Deliveries {

        @Test
        void anEventOfANameDeclaredForItsRouteIsAppliedOnce() {
            Message<byte[]> message = cloudEvent(UUID.randomUUID(), ThingHappened.NAME, "things.ce");

            this.deliveries.deliverMessage(message);
            this.deliveries.deliverMessage(message);

            assertThat(this.deliveries.lastError()).as("no copy was rejected").isNull();
            assertThat(effects()).isEqualTo(1);
        }

        @Test
        void anEventOfANameNotDeclaredForItsRouteIsRejected() {
            this.deliveries.deliverMessage(cloudEvent(UUID.randomUUID(), ThingHappened.NAME, "others.ce"));

            assertThat(deadLetteredReason()).startsWith("ROUTE_MISMATCH: ");
            assertThat(effects()).isZero();
        }

        private Message<byte[]> cloudEvent(UUID eventId, String type, String route) {
            return payloadWith(Map.of(
                    "ce_id",
                    eventId.toString(),
                    "ce_type",
                    type,
                    "ce_time",
                    "2026-12-04T10:15:30Z",
                    "amqp_receivedExchange",
                    "events",
                    "amqp_receivedRoutingKey",
                    route));
        }
    }

    @Nested
    @SpringBootTest(properties = "idempotency.event-id.source=cloudevents")
    @EnableIdempotencyTestKit
    class FromCloudEventsBinaryMode extends Deliveries {

        @ParameterizedTest(name = "{0}id, {0}type, {0}time")
        @ValueSource(strings = {"ce_", "ce-", "cloudEvents:", "cloudEvents_"})
        void ceIdCeTypeAndCeTimeIdentifyTheEventInEachSpelling(String prefix) {
            UUID eventId = UUID.randomUUID();
            Message<byte[]> message = payloadWith(Map.of(
                    prefix + "id",
                    eventId.toString().getBytes(UTF_8),
                    prefix + "type",
                    ThingHappened.NAME,
                    prefix + "time",
                    "2026-11-29T10:15:30Z"));

            this.deliveries.deliverMessage(message);
            this.deliveries.deliverMessage(message);

            assertThat(this.deliveries.lastError()).as("no copy was rejected").isNull();
            assertThat(this.probe.invocations("recordThing")).isEqualTo(1);
            assertThat(effects()).isEqualTo(1);
            assertThat(this.processedEvents.rows(eventId)).isEqualTo(1);
        }

        @Test
        void anIdThatIsNotAUuidIsRejected() {
            this.deliveries.deliverMessage(
                    payloadWith(Map.of("ce_id", "A234-1234-1234", "ce_type", ThingHappened.NAME)));

            assertThat(effects()).isZero();
            assertThat(deadLetteredReason()).startsWith("INVALID_EVENT_ID: ");
        }
    }

    @Nested
    @SpringBootTest(
            properties = {"idempotency.event-id.source=header", "idempotency.event-id.when-missing=pass-through"})
    @EnableIdempotencyTestKit
    class PassingMessagesWithoutIdThrough extends Deliveries {

        @Test
        void aMessageWithoutIdReachesTheBusinessFunctionUnguardedEveryTime() {
            Message<byte[]> message = payloadWith(Map.of("event_name", ThingHappened.NAME));

            this.deliveries.deliverMessage(message);
            this.deliveries.deliverMessage(message);

            assertThat(effects()).as("nothing can tell the copies apart").isEqualTo(2);
            assertThat(this.deliveries.lastError()).isNull();
        }
    }
}
