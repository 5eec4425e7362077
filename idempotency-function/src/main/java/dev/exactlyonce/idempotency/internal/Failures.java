package dev.exactlyonce.idempotency.internal;

import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import org.springframework.core.retry.RetryException;
import org.springframework.messaging.MessagingException;

/** Finds, in the exception a failed attempt ends with, the failure that matters. */
public final class Failures {

    private Failures() {}

    /** An exception that only carries its cause on to where it is handled: {@link #real} looks past it. */
    public interface Wrapper {}

    /** The first exception of that type in the chain of causes, if any. */
    public static <T extends Throwable> @Nullable T find(Throwable failure, Class<T> type) {
        Throwable found = first(failure, type::isInstance);
        return found != null ? type.cast(found) : null;
    }

    /** The first exception of the chain of causes, the failure included, that matches, if any. */
    public static @Nullable Throwable first(Throwable failure, Predicate<? super Throwable> matching) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause() != cause ? cause.getCause() : null) {
            if (matching.test(cause)) {
                return cause;
            }
        }
        return null;
    }

    /** The innermost cause: the failure itself when it has none. */
    public static Throwable root(Throwable failure) {
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root;
    }

    /**
     * The failure below the binder's, channels' and retry's wrappers: the first cause that is no
     * {@link MessagingException}, {@link RetryException} or {@link Wrapper}, or the innermost one.
     */
    public static Throwable real(Throwable failure) {
        Throwable cause = failure;
        while ((cause instanceof MessagingException || cause instanceof RetryException || cause instanceof Wrapper)
                && cause.getCause() != null
                && cause.getCause() != cause) {
            cause = cause.getCause();
        }
        return cause;
    }
}
