package dev.exactlyonce.idempotency.retention;

import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import java.time.Duration;
import java.time.Instant;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * After each purge of ids: deletes the dead-letter records past the dead letters' retention, reports those still
 * waiting, and warns once the oldest has waited three quarters of it. See docs/operations.md, "Replaying dead letters".
 */
final class DeadLetterHorizon implements Runnable {

    private static final Logger logger = LoggerFactory.getLogger(DeadLetterHorizon.class);

    private final DeadLetterRecords records;

    private final IdempotencyMetrics metrics;

    DeadLetterHorizon(DeadLetterRecords records, IdempotencyMetrics metrics) {
        this.records = records;
        this.metrics = metrics;
    }

    @Override
    public void run() {
        this.records.purge();
        DeadLetterRecords.Waiting waiting = this.records.waiting();
        Duration retention = this.records.retention();
        this.metrics.deadLettersWaiting(waiting.count(), waiting.oldest(), retention);
        Instant oldest = waiting.oldest();
        if (oldest == null) {
            return;
        }
        Duration age = Duration.between(oldest, Instant.now());
        if (age.compareTo(retention.multipliedBy(3).dividedBy(4)) >= 0) {
            logger.warn(
                    "{} dead letter(s) of this service wait to be replayed, the oldest since {} ({} ago): a replay of it"
                            + " is refused as UNRECORDED_DEAD_LETTER once it is older than"
                            + " idempotency.replay-horizon.dead-letter-retention ({}), in {}. Replay them before"
                            + " then (one discarded from its queue is counted until it is older than that)",
                    waiting.count(),
                    oldest,
                    age.withNanos(0),
                    retention,
                    retention.minus(age).isNegative()
                            ? Duration.ZERO
                            : retention.minus(age).withNanos(0));
        }
    }
}
