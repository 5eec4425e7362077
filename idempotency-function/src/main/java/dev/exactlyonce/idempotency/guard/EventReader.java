package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyProperties.EventId;
import dev.exactlyonce.idempotency.IdempotencyProperties.EventIdSource;
import dev.exactlyonce.idempotency.IdempotencyProperties.MissingEventId;
import dev.exactlyonce.idempotency.LogSafe;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.envelope.Instants;
import dev.exactlyonce.idempotency.internal.IncomingEvent;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;

/** Reads the event a message carries: from the envelope or, per {@code idempotency.event-id.source}, from headers. */
final class EventReader {

    static final String AMQP_MESSAGE_ID = "amqp_messageId";

    /** CloudEvents' binary-mode prefixes; Spring's {@code CloudEventMessageUtils} (5.0) skips Kafka's byte values. */
    private static final List<String> CLOUDEVENTS_PREFIXES = List.of("ce_", "ce-", "cloudEvents:", "cloudEvents_");

    private final EnvelopeCodec codec;

    private final EventId settings;

    EventReader(EnvelopeCodec codec, EventId settings) {
        this.codec = codec;
        this.settings = settings;
    }

    /**
     * @param routes how the binding's binder tells routes; {@code null} where it does not (the test binder): no check
     * @param routeNames the event names each route may carry besides its own name
     */
    IncomingEvent read(
            MessageHeaders headers, byte[] body, @Nullable EventRoutes routes, Map<String, List<String>> routeNames) {
        return checked(
                readEvent(headers, body, routes),
                routes,
                routeNames,
                () -> routes != null ? routes.route(headers) : null,
                () -> routes != null && routes.movedBack(headers));
    }

    /** The event of the message at that index of a batch, read as {@link #read} reads a message alone. */
    IncomingEvent readInBatch(
            Message<?> batch,
            int index,
            byte[] body,
            @Nullable EventRoutes routes,
            Map<String, List<String>> routeNames) {
        if (this.settings.source() != EventIdSource.ENVELOPE) {
            return read(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)), body, routes, routeNames);
        }
        return checked(
                readEvent(batch.getHeaders(), body, routes),
                routes,
                routeNames,
                () -> routes != null ? routes.route(batch, index) : null,
                () -> routes != null && routes.movedBack(batch, index));
    }

    /**
     * The event, once its name is checked, and its route where {@code route-check} is on and the binder tells routes.
     * The check fails closed (no route is a mismatch); a dead letter moved back to its queue is marked as one instead.
     */
    private IncomingEvent checked(
            IncomingEvent event,
            @Nullable EventRoutes routes,
            Map<String, List<String>> routeNames,
            Supplier<@Nullable String> routeOf,
            BooleanSupplier movedBack) {
        if (!EventEnvelope.isEventName(event.eventName())) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_NAME,
                    event.eventId(),
                    ("the event name '%s' holds characters other than letters, digits, '.', '-' and '_', or is longer"
                                    + " than 255")
                            .formatted(LogSafe.of(event.eventName())));
        }
        if (this.settings.routeCheck() && routes != null) {
            String route = routeOf.get();
            if (route == null && movedBack.getAsBoolean()) {
                return event.movedBackToItsQueue();
            }
            if (route == null || route.isEmpty()) {
                throw new RejectedMessageException(
                        Reason.ROUTE_MISMATCH,
                        event.eventId(),
                        ("the event %s arrived by no routing key or topic the binder can tell, so its name cannot be"
                                        + " checked against it: an event is published under its own name"
                                        + " (idempotency.event-id.route-check)")
                                .formatted(event.eventName()));
            }
            List<String> carried = routeNames.getOrDefault(route, List.of());
            if (!route.equals(event.eventName()) && !carried.contains(event.eventName())) {
                throw new RejectedMessageException(
                        Reason.ROUTE_MISMATCH,
                        event.eventId(),
                        ("the event's name, %s, is not the routing key or topic it arrived by, '%s'%s: an event is"
                                        + " published under its own name, or under a route the binding declares for"
                                        + " it (idempotency.event-id.route-check, idempotency.bindings.<binding>"
                                        + ".routes)")
                                .formatted(
                                        event.eventName(),
                                        LogSafe.of(route),
                                        carried.isEmpty() ? "" : ", nor one of the names declared for it, " + carried));
            }
        }
        return event;
    }

    private IncomingEvent readEvent(MessageHeaders headers, byte[] body, @Nullable EventRoutes routes) {
        if (this.settings.source() == EventIdSource.ENVELOPE) {
            EventEnvelope<EnvelopeCodec.RawPayload> envelope = this.codec.read(body);
            return new IncomingEvent(
                    envelope.eventId(), envelope.eventName(), envelope.occurredAt(), envelope.payload());
        }
        UUID eventId = eventId(headers);
        boolean cloudEvent = this.settings.source() == EventIdSource.CLOUDEVENTS;
        String eventName = cloudEvent ? cloudEventHeader(headers, "type") : text(headers, EventHeaders.EVENT_NAME);
        if (eventName == null && !cloudEvent) {
            eventName = routes != null ? routes.eventName(headers) : null;
        }
        if (eventName == null || eventName.isBlank()) {
            throw new RejectedMessageException(
                    Reason.MISSING_FIELD,
                    eventId,
                    cloudEvent
                            ? "the message has no ce_type header"
                            : "the message has no event_name header and no routing key");
        }
        String time = cloudEvent ? cloudEventHeader(headers, "time") : text(headers, EventHeaders.OCCURRED_AT);
        return new IncomingEvent(
                eventId, eventName, occurredAt(time, eventId), this.codec.readBarePayload(body, eventId));
    }

    private @Nullable UUID eventId(MessageHeaders headers) {
        String text = switch (this.settings.source()) {
            case HEADER -> text(headers, this.settings.header());
            case MESSAGE_ID -> text(headers, AMQP_MESSAGE_ID);
            case CLOUDEVENTS -> cloudEventHeader(headers, "id");
            case ENVELOPE -> throw new IllegalStateException("the envelope carries its own id");
        };
        if (text == null || text.isBlank()) {
            if (this.settings.whenMissing() == MissingEventId.PASS_THROUGH) {
                return null;
            }
            throw new RejectedMessageException(
                    Reason.MISSING_EVENT_ID, null, "the message has no event id (%s)".formatted(describeSource()));
        }
        UUID eventId = EnvelopeCodec.parseCanonicalUuid(text.trim());
        if (eventId == null) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    null,
                    "the message's event id (%s) is not a UUID: '%s'".formatted(describeSource(), LogSafe.of(text)));
        }
        return eventId;
    }

    private String describeSource() {
        return switch (this.settings.source()) {
            case HEADER -> "header " + this.settings.header();
            case MESSAGE_ID -> "AMQP message_id";
            case CLOUDEVENTS -> "header ce_id";
            case ENVELOPE -> "envelope event_id";
        };
    }

    private static @Nullable String cloudEventHeader(MessageHeaders headers, String attribute) {
        for (String prefix : CLOUDEVENTS_PREFIXES) {
            String value = text(headers, prefix + attribute);
            if (value != null) {
                return value;
            }
        }
        return null;
    }

    private static @Nullable String text(MessageHeaders headers, String name) {
        return text(headers.get(name));
    }

    /** A header's value as text: bytes (as on Kafka) read as UTF-8. */
    private static @Nullable String text(@Nullable Object value) {
        if (value instanceof byte[] bytes) {
            return new String(bytes, UTF_8);
        }
        return value != null ? value.toString() : null;
    }

    private static @Nullable Instant occurredAt(@Nullable String time, @Nullable UUID eventId) {
        if (time == null) {
            return null;
        }
        try {
            return Instants.parse(time);
        } catch (DateTimeParseException ex) {
            throw new RejectedMessageException(
                    Reason.INVALID_OCCURRED_AT,
                    eventId,
                    "the event time is not an ISO-8601 instant: " + LogSafe.of(time),
                    ex);
        }
    }
}
