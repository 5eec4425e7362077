package dev.exactlyonce.idempotency;

import org.jspecify.annotations.Nullable;

/** The one unchecked exception type of the library; subclasses exist only where a caller must tell them apart. */
public class IdempotencyException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public IdempotencyException(String message) {
        super(message);
    }

    public IdempotencyException(String message, @Nullable Throwable cause) {
        super(message, cause);
    }
}
