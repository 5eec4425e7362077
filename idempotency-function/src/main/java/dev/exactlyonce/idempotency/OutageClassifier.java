package dev.exactlyonce.idempotency;

/**
 * Tells a failure of something the service depends on from a failure of the message. A failure classified as an
 * outage never uses up the message's attempts and never dead-letters it: consumption of every guarded binding halts
 * until the database answers again, and the message is processed again from the start.
 *
 * <p>The library always recognizes the database's own outages (connection failures, a server shutting down or
 * refusing connections, a read-only server after a failover). Declare a bean of this type, or list exception types in
 * {@code idempotency.outage.exceptions}, for other dependencies whose failure is never the message's fault, such as a
 * payment provider answering 503: consumption then halts, and each held message is tried again once per probe,
 * without using its attempts, rather than dead-lettered. On RabbitMQ 4.0 to 4.2, each message held is still given back
 * to its quorum queue once per {@code idempotency.outage.max-hold}, and each return counts against the queue's delivery
 * limit.
 */
@FunctionalInterface
public interface OutageClassifier {

    /** Whether the failure, or any of its causes, means a dependency is unavailable. */
    boolean isOutage(Throwable failure);
}
