package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;
import org.jspecify.annotations.Nullable;

/** Gives a message back to the binder during an outage: neither retried nor dead-lettered, it is delivered again. */
public final class OutageException extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public OutageException(String message, @Nullable Throwable cause) {
        super(message, cause);
    }
}
