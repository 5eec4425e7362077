package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import org.jspecify.annotations.Nullable;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;

/**
 * What a message was routed by, as its binder received it: one per binder, registered by its auto-configuration
 * ({@code binder.rabbit}: the routing key it was published with; {@code binder.kafka}: its topic), and asked only about
 * the messages of the bindings of that binder. The guard refuses an event whose name is not its route
 * ({@code idempotency.event-id.route-check}).
 *
 * <p>Not API: implemented by the library's binder packages, and may change in any release.
 */
public interface EventRoutes {

    /**
     * Whether the binding's binder is this one's: known by the type of the binding's extended consumer properties
     * (which a binder the service wraps, or a proxy of it, keeps), {@code null} for a binder without them.
     */
    boolean binds(Object binder, @Nullable Object consumerProperties);

    /** The message's route, or {@code null} when the binder did not say it. */
    @Nullable
    String route(MessageHeaders headers);

    /**
     * The route of the message at that index of a batch the binder delivered (a message whose payload is the list of
     * their bodies), or {@code null} when the binder did not say it. By default, read from that message's own headers,
     * built for it.
     */
    default @Nullable String route(Message<?> batch, int index) {
        return route(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)));
    }

    /**
     * Whether the binder's dead letters can be moved back to their queue by a path that carries no route the broker
     * vouches for (RabbitMQ: the queue's replay exchange, or the default exchange). The guard then records each event
     * it dead-letters once its route was checked, and takes such a message only when it recorded it. None by default.
     */
    default boolean movesDeadLettersBack() {
        return false;
    }

    /**
     * Whether the message arrived by such a path ({@link #movesDeadLettersBack}); its {@link #route} is then
     * {@code null}, and only asked for then.
     */
    default boolean movedBack(MessageHeaders headers) {
        return false;
    }

    /** Whether the message at that index of a batch arrived by such a path. */
    default boolean movedBack(Message<?> batch, int index) {
        return movedBack(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)));
    }

    /**
     * The event's name when the message carries none (no {@code event_name} header): on RabbitMQ the routing key it
     * was published with, which is the event's name; none by default.
     */
    default @Nullable String eventName(MessageHeaders headers) {
        return null;
    }
}
