package dev.exactlyonce.idempotency.test;

import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;

/** Reads the service's {@code processed_event} table in tests. */
public final class ProcessedEvents {

    private static final String COUNT = "SELECT count(*) FROM %s WHERE event_id = ?";

    private static final String BLOCKED_CLAIMS = """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO %s %%'""";

    private final JdbcTemplate jdbcTemplate;

    private final String countSql;

    private final String blockedClaimsSql;

    ProcessedEvents(JdbcTemplate jdbcTemplate, String tableName) {
        this.jdbcTemplate = jdbcTemplate;
        this.countSql = COUNT.formatted(tableName);
        this.blockedClaimsSql = BLOCKED_CLAIMS.formatted(tableName);
    }

    /** How many rows record the event: 1 once it was processed, 0 before or after a rollback. */
    public int rows(UUID eventId) {
        Integer rows = this.jdbcTemplate.queryForObject(this.countSql, Integer.class, eventId);
        return rows != null ? rows : 0;
    }

    /** How many claims are waiting, right now, for another transaction's claim of the same event to end. */
    public int blockedClaims() {
        Integer blocked = this.jdbcTemplate.queryForObject(this.blockedClaimsSql, Integer.class);
        return blocked != null ? blocked : 0;
    }
}
