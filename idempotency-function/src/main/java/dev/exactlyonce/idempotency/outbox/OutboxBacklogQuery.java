package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.Objects;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Reads what waits in the outbox ({@link OutboxBacklog}): the rows not yet published, how long the oldest of them the relay still tries to publish
 * (of a key not parked) has waited since it became publishable, and how many the relay parked.
 */
public final class OutboxBacklogQuery {

    private final JdbcTemplate jdbc;

    public OutboxBacklogQuery(DataSource dataSource) {
        this.jdbc = new JdbcTemplate(dataSource);
    }

    /** Whether the schema the service's connections use holds the outbox table. */
    static boolean tableExists(JdbcTemplate jdbc) {
        return TableName.exists(jdbc, "outbox_event");
    }

    /** The backlog now, or {@code null} when the service's schema has no outbox table. */
    @Nullable
    public OutboxBacklog read() {
        if (!tableExists(this.jdbc)) {
            return null;
        }
        String backlog = OutboxStatements.of(Dialect.of(Objects.requireNonNull(this.jdbc.getDataSource())))
                .backlog();
        return this.jdbc.queryForObject(backlog, (row, index) -> {
            Timestamp oldest = row.getTimestamp(3);
            return new OutboxBacklog(
                    row.getLong(1),
                    oldest != null ? oldest.toInstant() : null,
                    Duration.ofMillis((long) (row.getDouble(4) * 1000)),
                    row.getLong(2));
        });
    }
}
