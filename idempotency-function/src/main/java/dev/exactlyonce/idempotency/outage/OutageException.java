package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;
import org.jspecify.annotations.Nullable;

/**
 * A message given back to the binder because a dependency is unavailable: never retried by the binder, never
 * dead-lettered; the message is delivered again once the outage ends.
 */
public final class OutageException extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public OutageException(String message, @Nullable Throwable cause) {
        super(message, cause);
    }
}
