package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import java.time.Instant;
import java.util.UUID;
import org.jspecify.annotations.Nullable;

/**
 * The event a message carries, as the guard reads it.
 *
 * @param eventId {@code null} only when the message has none and {@code idempotency.event-id.when-missing} lets it pass
 * @param payload the event's fields, as they came: mapped only once the event is claimed
 * @param movedBack whether it is a dead letter moved back by a path with no route: taken only if the guard recorded it
 */
public record IncomingEvent(
        @Nullable UUID eventId,
        String eventName,
        @Nullable Instant occurredAt,
        EnvelopeCodec.RawPayload payload,
        boolean movedBack) {

    public IncomingEvent(
            @Nullable UUID eventId, String eventName, @Nullable Instant occurredAt, EnvelopeCodec.RawPayload payload) {
        this(eventId, eventName, occurredAt, payload, false);
    }

    /** The event, as a dead letter moved back to its queue. */
    public IncomingEvent movedBackToItsQueue() {
        return new IncomingEvent(this.eventId, this.eventName, this.occurredAt, this.payload, true);
    }
}
