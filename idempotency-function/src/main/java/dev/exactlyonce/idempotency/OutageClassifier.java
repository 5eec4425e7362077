package dev.exactlyonce.idempotency;

/**
 * Tells a failure of something the service depends on from a failure of the message. A failure classified as an
 * outage never uses up the message's attempts and never dead-letters it: consumption of every guarded binding halts,
 * and the message is tried again later. Declare a bean of this type, or list exception types in
 * {@code idempotency.outage.exceptions}, for a dependency besides the database (a payment provider answering 503). See
 * docs/operations.md, "When things go wrong".
 */
@FunctionalInterface
public interface OutageClassifier {

    /** Whether the failure, or any of its causes, means a dependency is unavailable. */
    boolean isOutage(Throwable failure);
}
