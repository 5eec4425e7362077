package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * A statement of the library's own failed in a message's transaction for the database's condition, not the message's:
 * the transaction could not begin (the database refused a connection: a role locked out, a password rotated, a
 * database renamed, too many connections; nothing in a message causes that), or the claim of the message's event id
 * failed as the probe's own claim, of an id of its own, does too (its insert revoked, the day's partition missing, its
 * table full). It is always an outage ({@link DatabaseOutageClassifier}): the message is held until the database works
 * again for the guard, never dead-lettered for it.
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
