package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.guard.EventRoutes;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.kafka.properties.KafkaConsumerProperties;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.MessageHeaders;

/** A Kafka record's route: the topic it was received from, which the consumer's client sets. */
final class KafkaEventRoutes implements EventRoutes {

    @Override
    public boolean binds(Object binder, @Nullable Object consumerProperties) {
        return consumerProperties instanceof KafkaConsumerProperties;
    }

    @Override
    public @Nullable String route(MessageHeaders headers) {
        Object topic = headers.get(KafkaHeaders.RECEIVED_TOPIC);
        if (topic instanceof byte[] bytes) {
            return new String(bytes, UTF_8);
        }
        return topic != null ? topic.toString() : null;
    }
}
