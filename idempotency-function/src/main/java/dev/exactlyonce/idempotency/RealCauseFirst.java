package dev.exactlyonce.idempotency;

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
 * exception's cause ({@code x-exception-message} on RabbitMQ and Kafka). This replaces the wrappers with one
 * {@link MessagingException} whose cause is the failure itself, for example
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
        if (real == failure || real == failure.getCause()) {
            return message;
        }
        Message<?> failed = failure instanceof MessagingException messaging && messaging.getFailedMessage() != null
                ? messaging.getFailedMessage()
                : error.getOriginalMessage();
        MessagingException reported = failed != null
                ? new MessagingException(failed, String.valueOf(real.getMessage()), real)
                : new MessagingException(String.valueOf(real.getMessage()), real);
        reported.addSuppressed(failure);
        return new ErrorMessage(reported, error.getHeaders(), error.getOriginalMessage());
    }
}
