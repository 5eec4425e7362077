package dev.exactlyonce.idempotency;

import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Deletes the outbox rows published longer ago than the retention, in batches, one instance at a time (as
 * {@link ProcessedEventPurge} does for processed event ids). Rows not yet published are never deleted, however old,
 * unless the relay is off: another process (Debezium) publishes them, and nothing marks them.
 */
final class OutboxPurge {

    private static final Logger logger = LoggerFactory.getLogger(OutboxPurge.class);

    /**
     * The age is checked again on the row deleted: a row that {@code Outbox.republish} marked unpublished while the
     * delete waited for it is left, since PostgreSQL re-checks only the outer condition on a row updated meanwhile.
     */
    private static final String DELETE_PUBLISHED = """
            DELETE FROM outbox_event WHERE id IN (
                SELECT id FROM outbox_event
                WHERE published_at < now() - make_interval(secs => ?) ORDER BY published_at LIMIT ?)
            AND published_at < now() - make_interval(secs => ?)""";

    /** Without the relay, nothing marks rows published: Debezium reads them from the write-ahead log once committed. */
    private static final String DELETE_WRITTEN = """
            DELETE FROM outbox_event WHERE id IN (
                SELECT id FROM outbox_event
                WHERE occurred_at < now() - make_interval(secs => ?) ORDER BY occurred_at LIMIT ?)
            AND occurred_at < now() - make_interval(secs => ?)""";

    private final SessionLock lock;

    private final Duration retention;

    private final int batchSize;

    private final String deleteSql;

    OutboxPurge(DataSource dataSource, Duration retention, int batchSize, boolean relayed) {
        this.lock = new SessionLock(dataSource, "dev.exactlyonce.idempotency.purge", "outbox_event");
        this.retention = retention;
        this.batchSize = batchSize;
        this.deleteSql = relayed ? DELETE_PUBLISHED : DELETE_WRITTEN;
    }

    /** Purges now, unless another instance is purging; returns the rows deleted. */
    long purge() {
        if (this.lock.dialect().lacks(Dialect.Feature.OUTBOX) != null) {
            return 0;
        }
        try {
            return this.lock.runIfFree(this::deleteBatches).orElse(0L);
        } catch (SQLException ex) {
            throw new IdempotencyException("Could not purge outbox_event: " + ex.getMessage(), ex);
        }
    }

    private long deleteBatches(JdbcTemplate jdbc) {
        double age = this.retention.toSeconds();
        long rows = BatchedDelete.run(this.batchSize, () -> jdbc.update(this.deleteSql, age, this.batchSize, age))
                .rows();
        logger.info("Purged {} outbox row(s) published more than {} ago", rows, this.retention);
        return rows;
    }
}
