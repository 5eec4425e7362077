package dev.exactlyonce.idempotency.envelope;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Names of the message headers that carry the envelope's fields to the business function, which receives the
 * payload alone (declare the function's input as {@code Message<T>} to read them).
 */
public final class EventHeaders {

    /** The event id, a {@link java.util.UUID}. */
    public static final String EVENT_ID = "event_id";

    /** The event name, a {@link String}. */
    public static final String EVENT_NAME = "event_name";

    /** When the event occurred, an {@link java.time.Instant}; absent when the envelope has no {@code occurred_at}. */
    public static final String OCCURRED_AT = "occurred_at";

    private EventHeaders() {}

    /**
     * The routing key a dead letter was published with, as recorded when it was dead-lettered: by the Rabbit binder's
     * republisher ({@code x-original-routingKey}, unless the message had itself come through the default exchange) or
     * by the broker ({@code x-death}, whose oldest death from a named exchange is the first). A dead letter moved back
     * to its queue through the default exchange has the queue's name as routing key; this is the event's.
     *
     * @param headers a message's headers, as Spring or the RabbitMQ client gives them
     * @return the routing key, or {@code null} when the headers record none
     */
    public static @Nullable String deadLetteredRoutingKey(Map<String, ?> headers) {
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
