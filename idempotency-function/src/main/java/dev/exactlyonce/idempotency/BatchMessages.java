package dev.exactlyonce.idempotency;

import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The messages of a batch, as a binder delivers them: one message whose payload is the list of the bodies, and whose
 * headers of one value per body are lists of the same length (RabbitMQ: {@code amqp_batchedHeaders}, one map of
 * headers per message; Kafka: {@code kafka_batchConvertedHeaders}, {@code kafka_offset}, {@code kafka_receivedKey}
 * and the like).
 */
final class BatchMessages {

    private BatchMessages() {}

    /**
     * The headers of the message at that index: the batch's own, with each list of one value per message replaced by
     * that message's value (a map of headers is merged in).
     */
    static Map<String, Object> headersOf(Message<?> batch, int index) {
        int size = ((List<?>) batch.getPayload()).size();
        Map<String, Object> headers = new HashMap<>();
        Map<String, Object> merged = new HashMap<>();
        batch.getHeaders().forEach((name, value) -> {
            if (isIdOrTimestamp(name)) {
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

    /** A batch of the one message at that index, with the batch's headers of one value per message cut to its own. */
    static Message<Object> single(Message<?> batch, int index) {
        List<?> bodies = (List<?>) batch.getPayload();
        MessageBuilder<Object> single = MessageBuilder.withPayload(Collections.singletonList(bodies.get(index)));
        batch.getHeaders().forEach((name, value) -> {
            if (!isIdOrTimestamp(name)) {
                single.setHeader(
                        name,
                        value instanceof List<?> values && values.size() == bodies.size()
                                ? Collections.singletonList(values.get(index)) // may be null: a Kafka record's key
                                : value);
            }
        });
        return single.build();
    }

    private static boolean isIdOrTimestamp(String name) {
        return MessageHeaders.ID.equals(name) || MessageHeaders.TIMESTAMP.equals(name);
    }
}
