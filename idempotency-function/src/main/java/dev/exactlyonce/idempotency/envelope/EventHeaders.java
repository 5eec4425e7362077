package dev.exactlyonce.idempotency.envelope;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;

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
     * The headers of the message at that index of a batch (or of a lone message), as a binder delivers it: a header
     * that holds a list of one value per message (RabbitMQ's {@code amqp_batchedHeaders}, Kafka's {@code kafka_offset}
     * and the like) gives that message's value; the others are kept, except the batch's id and timestamp.
     */
    public static Map<String, Object> ofMessageInBatch(Message<?> batch, int index) {
        int size = batch.getPayload() instanceof List<?> bodies ? bodies.size() : -1;
        Map<String, Object> headers = new HashMap<>();
        Map<String, Object> merged = new HashMap<>();
        batch.getHeaders().forEach((name, value) -> {
            if (MessageHeaders.ID.equals(name) || MessageHeaders.TIMESTAMP.equals(name)) {
                return;
            }
            if (value instanceof List<?> values && values.size() == size) {
                Object own = values.get(index);
                if (own instanceof Map<?, ?> map) {
                    map.forEach((key, header) -> {
                        if (header != null) {
                            merged.put(String.valueOf(key), header);
                        }
                    });
                } else if (own != null) {
                    headers.put(name, own);
                }
            } else {
                headers.put(name, value);
            }
        });
        merged.forEach(headers::putIfAbsent);
        return headers;
    }
}
