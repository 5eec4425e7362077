package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import org.jspecify.annotations.Nullable;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;

/**
 * What a message was routed by (RabbitMQ's routing key, Kafka's topic), one per binder: the guard refuses an event
 * whose name is not its route ({@code idempotency.event-id.route-check}). Not API: it may change in any release.
 */
public interface EventRoutes {

    /** Whether the binding's binder is this one's, by its extended consumer properties' type ({@code null}: none). */
    boolean binds(Object binder, @Nullable Object consumerProperties);

    /** The message's route, or {@code null} when the binder did not say it. */
    @Nullable
    String route(MessageHeaders headers);

    /** The route of the message at that index of a batch, or {@code null}; by default, from headers built for it. */
    default @Nullable String route(Message<?> batch, int index) {
        return route(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)));
    }

    /**
     * Whether dead letters can be moved back by a path that carries no route (RabbitMQ's replay or default exchange):
     * the guard then takes such a message only when it recorded its dead letter. None by default.
     */
    default boolean movesDeadLettersBack() {
        return false;
    }

    /** Whether the message arrived by such a path ({@link #movesDeadLettersBack}): its {@link #route} is then null. */
    default boolean movedBack(MessageHeaders headers) {
        return false;
    }

    /** Whether the message at that index of a batch arrived by such a path. */
    default boolean movedBack(Message<?> batch, int index) {
        return movedBack(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)));
    }

    /** The event's name when the message has no {@code event_name} header (RabbitMQ's routing key); none by default. */
    default @Nullable String eventName(MessageHeaders headers) {
        return null;
    }
}
