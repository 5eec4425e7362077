package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.LogSafe;
import dev.exactlyonce.idempotency.internal.Failures;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * On a guarded binding's error channel: puts the real failure first in the error message the binder dead-letters, so
 * that {@code x-exception-message} says why, not "Retry policy ... exhausted". See docs/design.md, "How it works".
 */
final class DeadLetterCauseUnwrapper implements ChannelInterceptor {

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error)) {
            return message;
        }
        Throwable failure = error.getPayload();
        Throwable real = Failures.real(failure);
        Throwable shown = shown(real);
        if (shown == real && (real == failure || (real == failure.getCause() && failure.getMessage() == null))) {
            return message;
        }
        Message<?> failed = failure instanceof MessagingException messaging && messaging.getFailedMessage() != null
                ? messaging.getFailedMessage()
                : error.getOriginalMessage();
        // No message of its own: binders record the cause's (RabbitMQ) or append it to this one's (Kafka).
        MessagingException reported = failed != null
                ? new MessagingException(failed, null, shown)
                : new MessagingException((String) null, shown);
        reported.addSuppressed(failure);
        return new ErrorMessage(reported, error.getHeaders(), error.getOriginalMessage());
    }

    /** As {@code x-exception-message} shows it: the library's own texts as they are, a dependency's escaped and cut. */
    private static Throwable shown(Throwable real) {
        String text = real.getMessage();
        if (real instanceof IdempotencyException
                || text == null
                || LogSafe.of(text).equals(text)) {
            return real;
        }
        return new FailureText(real);
    }

    /** A failure, shown by its type and its text escaped and cut; the failure itself is its cause. */
    static final class FailureText extends RuntimeException {

        FailureText(Throwable failure) {
            super(failure.getClass().getName() + ": " + LogSafe.of(failure.getMessage()), failure, false, false);
        }
    }
}
