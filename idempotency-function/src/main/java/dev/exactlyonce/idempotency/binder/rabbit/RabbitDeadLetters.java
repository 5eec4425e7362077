package dev.exactlyonce.idempotency.binder.rabbit;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The route a dead letter was first published by, as RabbitMQ and the Rabbit binder record it: for the route check and
 * the dead-letter replay, for which it is public; not API.
 */
public final class RabbitDeadLetters {

    private RabbitDeadLetters() {}

    /**
     * The routing key a dead letter was first published with: the binder's {@code x-original-routingKey} (unless it
     * came through the default exchange), else the oldest {@code x-death} from a named exchange.
     *
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
