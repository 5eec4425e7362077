package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.kafka.properties.KafkaProducerProperties;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The relay's rows on Kafka: keyed by the row's key, so that the events of a key stay in one partition, in order; each
 * send waits for the broker's acknowledgement (the producer's {@code sync}; mind {@code acks}), so a row is confirmed
 * once its send returned.
 */
final class KafkaPublishConfirmation implements PublishConfirmation {

    @Override
    public boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties) {
        if (!(producerProperties instanceof KafkaProducerProperties kafka)) {
            return false;
        }
        kafka.setSync(true);
        return true;
    }

    @Override
    public boolean waitsForTheBroker() {
        return true;
    }

    @Override
    public CompletableFuture<Answer> answer(MessageBuilder<byte[]> message, UUID eventId, String key) {
        message.setHeader(KafkaHeaders.KEY, key.getBytes(UTF_8));
        return CompletableFuture.completedFuture(Answer.CONFIRMED);
    }

    /**
     * A retriable failure (a timeout, a leader not available), or a send interrupted, says nothing of the record; any
     * other does.
     */
    @Override
    public boolean unanswered(Throwable failure) {
        return Failures.find(failure, RetriableException.class) != null
                || Failures.find(failure, InterruptException.class) != null;
    }
}
