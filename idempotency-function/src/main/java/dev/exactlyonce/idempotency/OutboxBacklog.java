package dev.exactlyonce.idempotency;

import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;

/** What waits in the outbox: the rows not yet published, and how long the oldest of them has waited. */
final class OutboxBacklog {

    private static final String BACKLOG = """
            SELECT count(*), min(occurred_at), coalesce(extract(epoch FROM clock_timestamp() - min(occurred_at)), 0)
            FROM outbox_event WHERE published_at IS NULL""";

    private static final String TABLE_EXISTS = """
            SELECT to_regclass('outbox_event') IS NOT NULL""";

    private final JdbcTemplate jdbc;

    OutboxBacklog(DataSource dataSource) {
        this.jdbc = new JdbcTemplate(dataSource);
    }

    /** Whether the schema the service's connections use holds the outbox table. */
    static boolean tableExists(JdbcTemplate jdbc) {
        return Boolean.TRUE.equals(jdbc.queryForObject(TABLE_EXISTS, Boolean.class));
    }

    /** The backlog now, or {@code null} when the service's schema has no outbox table. */
    IdempotencyEndpoint.@Nullable Outbox read() {
        if (!tableExists(this.jdbc)) {
            return null;
        }
        return this.jdbc.queryForObject(BACKLOG, (row, index) -> {
            Timestamp oldest = row.getTimestamp(2);
            Instant oldestWrittenAt = oldest != null ? oldest.toInstant() : null;
            return new IdempotencyEndpoint.Outbox(
                    row.getLong(1), oldestWrittenAt, Duration.ofMillis((long) (row.getDouble(3) * 1000)));
        });
    }
}
