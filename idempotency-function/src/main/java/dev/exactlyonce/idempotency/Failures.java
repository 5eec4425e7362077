package dev.exactlyonce.idempotency;

import org.jspecify.annotations.Nullable;
import org.springframework.core.retry.RetryException;
import org.springframework.messaging.MessagingException;

/** Finds, in the exception a failed attempt ends with, the failure that matters. */
final class Failures {

    private Failures() {}

    /** The first exception of that type in the chain of causes, if any. */
    static <T extends Throwable> @Nullable T find(Throwable failure, Class<T> type) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (type.isInstance(cause)) {
                return type.cast(cause);
            }
            if (cause.getCause() == cause) {
                break;
            }
        }
        return null;
    }

    /**
     * The failure itself, below the wrappers the binder, the channels and the retry add around it: the first cause
     * that is neither a {@link MessagingException} nor a {@link RetryException}, or the innermost one.
     */
    static Throwable real(Throwable failure) {
        Throwable cause = failure;
        while ((cause instanceof MessagingException || cause instanceof RetryException)
                && cause.getCause() != null
                && cause.getCause() != cause) {
            cause = cause.getCause();
        }
        return cause;
    }
}
