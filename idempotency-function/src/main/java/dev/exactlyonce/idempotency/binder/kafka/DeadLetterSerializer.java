package dev.exactlyonce.idempotency.binder.kafka;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.jspecify.annotations.Nullable;

/**
 * Writes a rejected record's key or value back as it came: bytes as they are, a {@code String} as UTF-8; anything else
 * fails, naming the serializer to set. See docs/reference.md, "Swapping binders".
 */
public final class DeadLetterSerializer implements Serializer<Object> {

    @Override
    public byte @Nullable [] serialize(String topic, @Nullable Object data) {
        if (data == null || data instanceof byte[]) {
            return (byte[]) data;
        }
        if (data instanceof String text) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
        if (data instanceof Bytes bytes) {
            return bytes.get();
        }
        if (data instanceof ByteBuffer buffer) {
            byte[] bytes = new byte[buffer.remaining()];
            buffer.duplicate().get(bytes);
            return bytes;
        }
        throw new SerializationException(
                ("A dead letter for %s holds a %s, which cannot be written back as it came: set"
                                + " the binding's dlq-producer-properties.configuration.key.serializer (or value.serializer) to"
                                + " the serializer that matches its consumer's deserializer")
                        .formatted(topic, data.getClass().getName()));
    }
}
