package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import org.springframework.util.Assert;

/**
 * An event the service emits, returned by a guarded {@code Function} (alone or in a list) or passed to
 * {@link dev.exactlyonce.idempotency.outbox.Outbox#emit(OutgoingEvent)}: written to the outbox in the transaction of
 * its effect, with its event id, and published after that commits. Its payload is a JSON object. See docs/outbox.md.
 *
 * @param name its {@code event_name} and routing key, refused unless {@link EventEnvelope#isEventName} accepts it
 * @param key what the event is about (the aggregate's id; on Kafka, the record's key), whose events publish in order
 */
public record OutgoingEvent(String name, String key, Object payload) {

    public OutgoingEvent {
        Assert.hasText(name, "An outgoing event needs a name");
        Assert.isTrue(
                EventEnvelope.isEventName(name),
                () -> ("An outgoing event's name holds a letter or digit, then letters, digits, '.', '-' and '_', 255"
                                + " in all: every consumer guarded by this library dead-letters '%s' (INVALID_EVENT_NAME)")
                        .formatted(LogSafe.of(name)));
        Assert.hasText(key, "An outgoing event needs a key (the id of what it is about)");
        Assert.notNull(payload, "An outgoing event needs a payload");
    }
}
