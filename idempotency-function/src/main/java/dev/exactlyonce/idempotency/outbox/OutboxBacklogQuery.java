package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import java.time.Duration;
import java.util.Comparator;
import java.util.Objects;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;

/** Reads what waits in the outbox ({@link OutboxBacklog}) from the keys' heads and held rows, never from every row. */
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
        OutboxStatements sql = OutboxStatements.of(Dialect.of(Objects.requireNonNull(this.jdbc.getDataSource())));
        OutboxStatements.Head oldest = sql.heads(this.jdbc, null, OutboxRelay.MAX_KEYS).heads().stream()
                .filter(head -> !head.parked())
                .max(Comparator.comparingDouble(OutboxStatements.Head::waited))
                .orElse(null);
        long parked = this.jdbc.queryForObject(sql.held(), (row, index) -> row.getLong(1));
        return new OutboxBacklog(
                sql.unpublished(this.jdbc),
                oldest != null ? oldest.publishableAt() : null,
                oldest != null ? Duration.ofMillis((long) (oldest.waited() * 1000)) : Duration.ZERO,
                parked);
    }
}
