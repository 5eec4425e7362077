package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * A statement of the library's own failed in a message's transaction: the transaction could not begin, or the claim of
 * the message's event id failed for a reason other than a conflict with another transaction. Nothing in a message can
 * cause either: a transaction fails to begin when the database refuses a connection (a role locked out, a password
 * rotated, a database renamed, too many connections), and the claim is the same statement for every message but the
 * id, checked before it runs, so it fails for the table's condition (its insert revoked, its partition missing, its
 * disk full). It is always an outage ({@link DatabaseOutageClassifier}): the message is held until the database works
 * again for the guard (its probe makes the same write), never dead-lettered for it.
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

    /** The claim of the message's event id failed, and not for a conflict. */
    public static GuardStatementFailed claim(String bindingName, RuntimeException cause) {
        return new GuardStatementFailed(
                "Could not claim the event id of a message of %s in the table of processed events: %s"
                        .formatted(bindingName, cause.getMessage()),
                cause);
    }
}
