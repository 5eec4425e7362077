package dev.exactlyonce.idempotency.retention;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.BatchedDelete;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.SessionLock;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Deletes the processed event ids older than the retention, without blocking the guard: under the table's session lock
 * (or not at all, if another instance holds it), before a cutoff read from the database's clock, {@code batch-size}
 * rows per auto-committed statement. On a schedule, or now with {@link #purge()}. See docs/operations.md, "Retention,
 * purge and partitions".
 */
public final class ProcessedEventPurge {

    private static final Logger logger = LoggerFactory.getLogger(ProcessedEventPurge.class);

    private static final String OLDEST = "SELECT min(processed_at) FROM %s";

    /**
     * What a run did: {@code ran} is {@code false} when another instance held the lock; {@code batches} counts its
     * transactions; the rows older than {@code cutoff} were deleted.
     */
    public record Result(boolean ran, long rows, int batches, Instant cutoff, Duration took) {}

    /** A run of this instance, and when it ended. */
    public record Run(Instant at, Result result) {}

    private final String tableName;

    private final Duration retention;

    private final int batchSize;

    private final IdempotencyMetrics metrics;

    private final SessionLock lock;

    private volatile @Nullable Run lastRun;

    /** A purge of your own, for a scheduler of the platform; {@code batchSize}: the rows each transaction deletes. */
    public ProcessedEventPurge(DataSource dataSource, String tableName, Duration retention, int batchSize) {
        this(dataSource, tableName, retention, batchSize, IdempotencyMetrics.NONE);
    }

    ProcessedEventPurge(
            DataSource dataSource, String tableName, Duration retention, int batchSize, IdempotencyMetrics metrics) {
        this.tableName = tableName;
        this.retention = retention;
        this.batchSize = batchSize;
        this.metrics = metrics;
        this.lock = new SessionLock(dataSource, "dev.exactlyonce.idempotency", tableName);
    }

    /** Purges now, unless another instance is purging. */
    public Result purge() {
        long start = System.nanoTime();
        try {
            Result result = this.lock
                    .runIfFree(jdbc -> deleteBatches(jdbc, start))
                    .orElseGet(() -> {
                        logger.info("Skipped the purge of {}: another instance is purging it", this.tableName);
                        return new Result(false, 0, 0, Instant.EPOCH, elapsed(start));
                    });
            this.metrics.purged(result.ran(), result.rows(), result.took());
            this.lastRun = new Run(Instant.now(), result);
            return result;
        } catch (SQLException ex) {
            throw new IdempotencyException("Could not purge " + this.tableName + ": " + ex.getMessage(), ex);
        }
    }

    /** This instance's last run, {@code null} before its first. */
    public @Nullable Run lastRun() {
        return this.lastRun;
    }

    private Result deleteBatches(JdbcTemplate jdbc, long start) {
        Dialect dialect = this.lock.dialect();
        Timestamp cutoff = jdbc.queryForObject(
                dialect.purgeCutoff(), Timestamp.class, TimeUnit.SECONDS.toMicros(this.retention.toSeconds()));
        String deleteSql = dialect.purgeBatch(this.tableName);
        BatchedDelete deleted = BatchedDelete.run(this.batchSize, () -> jdbc.update(deleteSql, cutoff, this.batchSize));
        Result result = new Result(true, deleted.rows(), deleted.batches(), cutoff.toInstant(), elapsed(start));
        // The oldest id kept (through the index on processed_at), for the alert on a purge that falls behind.
        Timestamp oldest = jdbc.queryForObject(OLDEST.formatted(this.tableName), Timestamp.class);
        this.metrics.processedIdsKept(oldest != null ? oldest.toInstant() : null, this.retention);
        logger.info(
                "Purged {} row(s) of {} processed before {} in {} batch(es) of at most {}, in {} ms",
                result.rows(),
                this.tableName,
                result.cutoff(),
                result.batches(),
                this.batchSize,
                result.took().toMillis());
        return result;
    }

    private static Duration elapsed(long start) {
        return Duration.ofNanos(System.nanoTime() - start);
    }
}
