package dev.exactlyonce.idempotency.binder.rabbit;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What RabbitMQ and the Rabbit binder record on a dead letter: the route it was first published by. Read by the route
 * check for a dead letter moved back to its queue, and by the dead-letter replay, which records it before the move.
 * Public for that tool; not API.
 */
public final class RabbitDeadLetters {

    private RabbitDeadLetters() {}

    /**
     * The routing key a dead letter was published with, as recorded when it was dead-lettered: by the Rabbit binder's
     * republisher ({@code x-original-routingKey}, unless the message had itself come through the default exchange) or
     * by the broker ({@code x-death}, whose oldest death from a named exchange is the first). A dead letter moved back
     * to its queue through the default exchange has the queue's name as routing key; this is the event's.
     *
     * @param headers a message's headers, as Spring or the RabbitMQ client gives them
     * @return the routing key, or {@code null} when the headers record none
     */
    public static @Nullable String firstRoutingKey(Map<String, ?> headers) {
        Object exchange = headers.get("x-original-exchange");
        Object routingKey = headers.get("x-original-routingKey");
        if (exchange != null && !exchange.toString().isEmpty() && routingKey != null) {
            return routingKey.toString();
        }
        if (headers.get("x-death") instanceof List<?> deaths) {
            for (int i = deaths.size() - 1; i >= 0; i--) {
                if (deaths.get(i) instanceof Map<?, ?> death
                        && death.get("exchange") != null
                        && !death.get("exchange").toString().isEmpty()
                        && death.get("routing-keys") instanceof List<?> keys
                        && !keys.isEmpty()) {
                    return keys.get(0).toString();
                }
            }
        }
        return null;
    }
}
