package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import org.springframework.util.Assert;

/**
 * An event the service emits: returned by a guarded {@code Function} (alone, or several in a list), or passed to
 * {@link dev.exactlyonce.idempotency.outbox.Outbox#emit(OutgoingEvent)}. It is written to the outbox in the
 * transaction of its effect, where it gets its event id (a UUID v7), and published after that transaction committed,
 * never before; every publication of it carries that id.
 *
 * @param name the event's name, such as {@code stock.stock.reserved.v1}: the {@code event_name} of its envelope and
 *     the routing key it is published with; a letter or digit, then letters, digits, {@code .}, {@code -} and
 *     {@code _}, 255 in all ({@link EventEnvelope#isEventName}), or the constructor refuses it
 * @param key what the event is about (the aggregate's id, such as the order id): events of one key are published in
 *     the order they were written; on Kafka, the record's key
 * @param payload the event's own fields, written as a JSON object
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
