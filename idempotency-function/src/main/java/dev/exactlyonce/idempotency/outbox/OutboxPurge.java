package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.jdbc.BatchedDelete;
import dev.exactlyonce.idempotency.jdbc.SessionLock;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Deletes, in batches and one instance at a time, the outbox rows published longer ago than the retention, and the
 * keys first written before it (a later write adds them again). Unpublished rows stay, unless the relay is off.
 */
final class OutboxPurge {

    private static final Logger logger = LoggerFactory.getLogger(OutboxPurge.class);

    private final SessionLock lock;

    private final Duration retention;

    private final int batchSize;

    private final boolean relayed;

    OutboxPurge(DataSource dataSource, Duration retention, int batchSize, boolean relayed) {
        this.lock = new SessionLock(dataSource, "dev.exactlyonce.idempotency.purge", "outbox_event");
        this.retention = retention;
        this.batchSize = batchSize;
        this.relayed = relayed;
    }

    /** Purges now, unless another instance is purging; returns the rows deleted. */
    long purge() {
        try {
            return this.lock.runIfFree(this::deleteBatches).orElse(0L);
        } catch (SQLException ex) {
            throw new IdempotencyException("Could not purge outbox_event: " + ex.getMessage(), ex);
        }
    }

    private long deleteBatches(JdbcTemplate jdbc) {
        OutboxStatements sql = OutboxStatements.of(this.lock.dialect());
        long rows = BatchedDelete.run(
                        this.batchSize, () -> sql.purgeBatch(jdbc, this.relayed, this.retention, this.batchSize))
                .rows();
        long keys = BatchedDelete.run(this.batchSize, () -> sql.purgeKeysBatch(jdbc, this.retention, this.batchSize))
                .rows();
        logger.info(
                "Purged {} outbox row(s) published more than {} ago, and {} key(s) first written before",
                rows,
                this.retention,
                keys);
        return rows;
    }
}
