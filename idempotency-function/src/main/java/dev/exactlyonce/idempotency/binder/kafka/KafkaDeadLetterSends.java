package dev.exactlyonce.idempotency.binder.kafka;

import dev.exactlyonce.idempotency.LogSafe;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.cloud.stream.binder.kafka.KafkaMessageChannelBinder;
import org.springframework.cloud.stream.binder.kafka.config.ClientFactoryCustomizer;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.core.ProducerPostProcessor;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;

/**
 * The Kafka binder only logs a dead letter it failed to publish, then commits past the record: this watches its
 * producers, and fails such a delivery on the error channel, to come again. See docs/operations.md, "When things go
 * wrong".
 */
final class KafkaDeadLetterSends implements ClientFactoryCustomizer {

    private static final Logger logger = LoggerFactory.getLogger(KafkaDeadLetterSends.class);

    /** Failures not yet asked about, at most: past it, they are forgotten (a binding that never asks). */
    private static final int REMEMBERED = 10_000;

    private final Map<Origin, Exception> failed = new ConcurrentHashMap<>();

    private record Origin(String topic, int partition, long offset) {

        @Override
        public String toString() {
            return this.topic + "-" + this.partition + "@" + this.offset;
        }
    }

    /** A delivery whose dead letter was not published: given back, to be delivered (and dead-lettered) again. */
    static final class NotPublished extends RuntimeException {

        NotPublished(String message, Throwable cause) {
            super(message, cause);
        }
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void configure(ProducerFactory<?, ?> producerFactory) {
        if (producerFactory instanceof DefaultKafkaProducerFactory factory) {
            ProducerPostProcessor<Object, Object> watch = this::watched;
            factory.addPostProcessor(watch);
        }
    }

    ChannelInterceptor check(String bindingName) {
        return new ChannelInterceptor() {
            @Override
            public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
                for (ConsumerRecord<?, ?> record : records(message)) {
                    Origin origin = new Origin(record.topic(), record.partition(), record.offset());
                    Exception failure = KafkaDeadLetterSends.this.failed.remove(origin);
                    if (failure != null) {
                        logger.warn(
                                "Could not publish the dead letter of {} ({}): {}; the record is delivered again, after"
                                        + " a back-off, until its dead letter is published",
                                origin,
                                bindingName,
                                LogSafe.of(failure.toString()));
                        throw new NotPublished(
                                "The dead letter of %s (%s) was not published".formatted(origin, bindingName), failure);
                    }
                }
            }
        };
    }

    private static List<? extends ConsumerRecord<?, ?>> records(Message<?> message) {
        Object source = message.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA);
        if (source instanceof ConsumerRecord<?, ?> record) {
            return List.of(record);
        }
        if (source instanceof List<?> list) {
            return list.stream()
                    .filter(ConsumerRecord.class::isInstance)
                    .map(record -> (ConsumerRecord<?, ?>) record)
                    .toList();
        }
        return List.of();
    }

    @SuppressWarnings("unchecked")
    private Producer<Object, Object> watched(Producer<Object, Object> producer) {
        InvocationHandler handler = (proxy, method, arguments) -> {
            if (method.getName().equals("send")
                    && arguments != null
                    && arguments.length == 2
                    && arguments[0] instanceof ProducerRecord<?, ?> record) {
                Origin origin = origin(record);
                if (origin != null) {
                    Callback callback = (Callback) arguments[1];
                    arguments[1] = (Callback) (metadata, exception) -> {
                        if (exception != null) {
                            remember(origin, exception);
                        }
                        if (callback != null) {
                            callback.onCompletion(metadata, exception);
                        }
                    };
                }
            }
            try {
                return method.invoke(producer, arguments);
            } catch (InvocationTargetException ex) {
                throw ex.getCause();
            }
        };
        return (Producer<Object, Object>)
                Proxy.newProxyInstance(Producer.class.getClassLoader(), new Class<?>[] {Producer.class}, handler);
    }

    private void remember(Origin origin, Exception exception) {
        if (this.failed.size() >= REMEMBERED) {
            this.failed.clear();
        }
        this.failed.put(origin, exception);
    }

    /** The record a dead letter came from, by the binder's headers; {@code null} for any other record. */
    private static @Nullable Origin origin(ProducerRecord<?, ?> record) {
        Header topic = record.headers().lastHeader(KafkaMessageChannelBinder.X_ORIGINAL_TOPIC);
        Header partition = record.headers().lastHeader(KafkaMessageChannelBinder.X_ORIGINAL_PARTITION);
        Header offset = record.headers().lastHeader(KafkaMessageChannelBinder.X_ORIGINAL_OFFSET);
        if (topic == null
                || partition == null
                || partition.value().length != Integer.BYTES
                || offset == null
                || offset.value().length != Long.BYTES) {
            return null;
        }
        return new Origin(
                new String(topic.value(), StandardCharsets.UTF_8),
                ByteBuffer.wrap(partition.value()).getInt(),
                ByteBuffer.wrap(offset.value()).getLong());
    }
}
