package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.internal.Failures;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * On a guarded binding's error channel: puts the real failure first in the error message the binder dead-letters.
 *
 * <p>After the last attempt, the binder publishes an error message whose exception wraps the retry's own
 * ("Retry policy for operation ... exhausted"), and the binder's dead-letter handlers record the message of the
 * exception's cause in {@code x-exception-message} (RabbitMQ: the cause's message; Kafka: the exception's message and
 * its cause's). This replaces the wrappers with one {@link MessagingException}, with no message of its own, whose
 * cause is the failure itself, for example
 * {@code NOT_JSON: the message body is not JSON: ...}; the original exception stays attached as a suppressed one, so
 * the recorded stack trace keeps every attempt.
 */
final class RealCauseFirst implements ChannelInterceptor {

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error)) {
            return message;
        }
        Throwable failure = error.getPayload();
        Throwable real = Failures.real(failure);
        if (real == failure || (real == failure.getCause() && failure.getMessage() == null)) {
            return message;
        }
        Message<?> failed = failure instanceof MessagingException messaging && messaging.getFailedMessage() != null
                ? messaging.getFailedMessage()
                : error.getOriginalMessage();
        // No message of its own: binders record the cause's (RabbitMQ) or append it to this one's (Kafka).
        MessagingException reported = failed != null
                ? new MessagingException(failed, null, real)
                : new MessagingException((String) null, real);
        reported.addSuppressed(failure);
        return new ErrorMessage(reported, error.getHeaders(), error.getOriginalMessage());
    }
}
