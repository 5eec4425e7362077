package dev.exactlyonce.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * A message given back to the binder because a dependency is unavailable: never retried by the binder, never
 * dead-lettered; the message is delivered again once the outage ends.
 */
final class OutageException extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    private final boolean held;

    /**
     * @param held whether the message was held already while consumption was halted (then it is given back at once);
     *     otherwise it is held in the error path first, until the database answers
     */
    OutageException(String message, @Nullable Throwable cause, boolean held) {
        super(message, cause);
        this.held = held;
    }

    boolean held() {
        return this.held;
    }
}
