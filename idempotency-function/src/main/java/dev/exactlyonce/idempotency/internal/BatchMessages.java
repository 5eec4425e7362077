package dev.exactlyonce.idempotency.internal;

import java.util.Collections;
import java.util.List;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The messages of a batch as a binder delivers them: one message whose payload lists the bodies, and whose per-body
 * headers are lists of the same length ({@code amqp_batchedHeaders}, {@code kafka_batchConvertedHeaders}, ...).
 */
public final class BatchMessages {

    /** Marks a batch of one message cut from a batch: by identity, which no header a broker delivers can forge. */
    private static final Object PART_OF_BATCH = new Object();

    private static final String PART_OF_BATCH_HEADER = "idempotency_partOfBatch";

    private BatchMessages() {}

    /** Whether the message is one {@link #single} cut from a batch, tried alone on the batch's thread. */
    public static boolean isPartOfBatch(Message<?> message) {
        return message.getHeaders().get(PART_OF_BATCH_HEADER) == PART_OF_BATCH;
    }

    /** A batch of the one message at that index, with the batch's headers of one value per message cut to its own. */
    public static Message<Object> single(Message<?> batch, int index) {
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
        single.setHeader(PART_OF_BATCH_HEADER, PART_OF_BATCH);
        return single.build();
    }

    private static boolean isIdOrTimestamp(String name) {
        return MessageHeaders.ID.equals(name) || MessageHeaders.TIMESTAMP.equals(name);
    }
}
