package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.kafka.properties.KafkaProducerProperties;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.converter.MessageConversionException;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The relay's rows on Kafka, keyed by the row's key (so that a key's events stay in one partition, in order); each
 * send waits for the broker's acknowledgement ({@code sync}; mind {@code acks}), so a row is confirmed once its send
 * returned.
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
    public boolean prepared(Object producerProperties) {
        return producerProperties instanceof KafkaProducerProperties kafka && kafka.isSync();
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

    /** A record too large or unserializable is the row's; not a batch too large: it holds other keys' records too. */
    @Override
    public Verdict failed(Throwable failure) {
        if (Failures.first(failure, ROUTE) != null) {
            return Verdict.ROUTE_REFUSED;
        }
        if (Failures.first(failure, ROW) != null) {
            return Verdict.ROW_REFUSED;
        }
        return Failures.first(failure, BROKER) != null ? Verdict.UNANSWERED : Verdict.UNEXPLAINED;
    }

    private static final Predicate<Throwable> ROUTE =
            failure -> failure instanceof TopicAuthorizationException || failure instanceof InvalidTopicException;

    private static final Predicate<Throwable> ROW = failure -> failure instanceof RecordTooLargeException
            || failure instanceof InvalidRecordException
            || failure instanceof SerializationException
            || failure instanceof MessageConversionException;

    private static final Predicate<Throwable> BROKER = failure -> failure instanceof RetriableException
            || failure instanceof InterruptException
            || failure instanceof AuthenticationException
            || failure instanceof AuthorizationException
            || failure instanceof TimeoutException;
}
