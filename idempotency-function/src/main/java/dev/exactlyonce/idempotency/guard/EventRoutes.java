package dev.exactlyonce.idempotency.guard;

import org.jspecify.annotations.Nullable;
import org.springframework.messaging.MessageHeaders;

/**
 * What a message was routed by, as its binder received it: one per binder, registered by its auto-configuration
 * ({@code binder.rabbit}: the routing key it was published with; {@code binder.kafka}: its topic). The guard refuses
 * an event whose name is not its route ({@code idempotency.event-id.route-check}).
 */
public interface EventRoutes {

    /** The message's route, or {@code null} when it did not come through this binder. */
    @Nullable
    String route(MessageHeaders headers);

    /**
     * The event's name when the message carries none (no {@code event_name} header): on RabbitMQ the routing key it
     * was published with, which is the event's name; none by default.
     */
    default @Nullable String eventName(MessageHeaders headers) {
        return null;
    }
}
