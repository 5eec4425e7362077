package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * A statement of the library's own failed for the database's condition: the transaction could not begin, or the claim
 * failed as the probe's does too. Always an outage: the message is held, never dead-lettered for it.
 */
public final class GuardStatementFailed extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    private GuardStatementFailed(String message, RuntimeException cause) {
        super(message, cause);
    }

    /** The message's transaction could not begin. */
    public static GuardStatementFailed begin(String bindingName, RuntimeException cause) {
        return new GuardStatementFailed(
                "Could not begin the transaction of a message of %s: %s".formatted(bindingName, cause.getMessage()),
                cause);
    }

    /** The claim of the message's event id failed, and so does the probe's. */
    public static GuardStatementFailed claim(String bindingName, RuntimeException cause) {
        return new GuardStatementFailed(
                "Could not claim the event id of a message of %s in the table of processed events: %s"
                        .formatted(bindingName, cause.getMessage()),
                cause);
    }
}
