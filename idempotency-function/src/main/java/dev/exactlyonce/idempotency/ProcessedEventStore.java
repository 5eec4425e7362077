package dev.exactlyonce.idempotency;

import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code processed_event} table: one row per event id this service has processed.
 *
 * <p>The key is the event id and a scope: {@code ""} when the key scope is the service, the function's name when it is
 * the function. A claim is one statement, {@code INSERT ... ON CONFLICT DO NOTHING}, run in the caller's transaction: one row
 * inserted means first delivery; zero rows means the id is already recorded (a duplicate). A concurrent claim of the
 * same id waits for the first transaction to end: it inserts nothing if that one commits, and inserts if it rolls
 * back. No error is raised on a duplicate, so the transaction stays usable (a unique violation would abort it).
 */
final class ProcessedEventStore {

    private static final String CLAIM = """
            INSERT INTO %s (event_id, scope) VALUES (?, ?) ON CONFLICT DO NOTHING""";

    private final JdbcTemplate jdbcTemplate;

    private final String claimSql;

    ProcessedEventStore(JdbcTemplate jdbcTemplate, String tableName) {
        this.jdbcTemplate = jdbcTemplate;
        this.claimSql = CLAIM.formatted(tableName);
    }

    /**
     * Records the event id in the scope ({@code ""} for the whole service, or a function's name); {@code true} when
     * this is its first delivery in that scope.
     */
    boolean claim(UUID eventId, String scope) {
        return this.jdbcTemplate.update(this.claimSql, eventId, scope) == 1;
    }
}
