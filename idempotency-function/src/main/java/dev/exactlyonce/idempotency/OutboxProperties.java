package dev.exactlyonce.idempotency;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * Configuration of the outbox, under the {@code idempotency.outbox} prefix. See docs/reference.md, "Configuration".
 *
 * @param destination Where the events emitted with Outbox.emit are published: the exchange (RabbitMQ) or topic
 *     (Kafka). A guarded function's events go to the destination of its output binding.
 * @param retention How long a published row is kept before the purge deletes it (with the relay off, any row). The
 *     purge runs every idempotency.purge.interval, unless idempotency.purge.enabled is false.
 * @param relay The relay that publishes the committed rows.
 */
@ConfigurationProperties("idempotency.outbox")
public record OutboxProperties(
        @DefaultValue("events") String destination,
        @DefaultValue("7d") Duration retention,
        @DefaultValue Relay relay) {

    /**
     * @param enabled Whether this service publishes its outbox's rows. Turn it off when another process publishes
     *     them (Debezium's Outbox Event Router, for one).
     * @param batchSize The most rows one run publishes before it waits for their confirms and marks them.
     * @param pollInterval How often the relay looks for rows when no commit woke it up (rows written by another
     *     instance, or left by a failed run).
     * @param linger How long a relay woken by a commit waits for more commits to join its run. Zero publishes at once.
     * @param confirmTimeout How long a run of the relay waits, in all, for the broker to confirm the rows it sends;
     *     the rows not confirmed by then are sent again by a later run.
     * @param lagBound The age of the oldest publishable row, of a key not parked, past which the outbox health is
     *     LAGGING. LAGGING answers 200 and is left out of the aggregate health.
     * @param maxAttempts How many times the broker may refuse a row before the relay parks it. The row and its key's
     *     later rows then wait until an operator releases or skips it.
     * @param firstHold The relay's first wait before it tries again: after a failed run, and for a destination, route
     *     or key the broker refused. Each wait in a row doubles, up to longest-hold.
     * @param longestHold The longest of the relay's waits before it tries again.
     */
    public record Relay(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("500") int batchSize,
            @DefaultValue("1s") Duration pollInterval,
            @DefaultValue("10ms") Duration linger,
            @DefaultValue("30s") Duration confirmTimeout,
            @DefaultValue("5m") Duration lagBound,
            @DefaultValue("10") int maxAttempts,
            @DefaultValue("1s") Duration firstHold,
            @DefaultValue("30s") Duration longestHold) {

        public Relay {
            if (batchSize < 1) {
                throw new IllegalArgumentException(
                        "idempotency.outbox.relay.batch-size must be at least 1, not " + batchSize);
            }
            if (maxAttempts < 1) {
                throw new IllegalArgumentException(
                        "idempotency.outbox.relay.max-attempts must be at least 1, not " + maxAttempts);
            }
            if (firstHold.toMillis() < 1 || longestHold.compareTo(firstHold) < 0) {
                throw new IllegalArgumentException(
                        "idempotency.outbox.relay.first-hold must be at least 1ms, and longest-hold at least as long,"
                                + " but they are %s and %s".formatted(firstHold, longestHold));
            }
        }
    }
}
