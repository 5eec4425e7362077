package dev.exactlyonce.idempotency;

/**
 * Tells a failure of a dependency from a failure of the message: an outage halts every guarded binding and never uses
 * up or dead-letters the message. Declare one (or list {@code idempotency.outage.exceptions}) for a dependency besides
 * the database. See docs/operations.md, "When things go wrong".
 */
@FunctionalInterface
public interface OutageClassifier {

    /** Whether the failure, or any of its causes, means a dependency is unavailable. */
    boolean isOutage(Throwable failure);
}
