package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import java.time.Instant;
import java.util.UUID;
import org.jspecify.annotations.Nullable;

/**
 * The event a message carries, as the guard reads it.
 *
 * @param eventId the producer's event id; {@code null} only when the message has none and
 *     {@code idempotency.event-id.when-missing} lets it through
 * @param eventName the event's name
 * @param occurredAt when the event occurred, if the message says
 * @param payload the event's fields, as they came: mapped only once the event is claimed
 * @param movedBack whether it is a dead letter moved back to its queue, with no route the broker vouches for: taken
 *     only if the guard recorded it when it dead-lettered it
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
