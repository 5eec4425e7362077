package dev.exactlyonce.idempotency.test;

import java.util.UUID;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;

/** Reads the service's {@code processed_event} table in tests, on PostgreSQL or MariaDB. */
public final class ProcessedEvents {

    private static final String COUNT = "SELECT count(*) FROM %s WHERE event_id = ?";

    private static final String BLOCKED_CLAIMS = """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO %s %%'""";

    private static final String BLOCKED_CLAIMS_MARIADB = """
            SELECT count(*) FROM information_schema.innodb_trx t
            JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
            WHERE p.db = DATABASE() AND t.trx_state = 'LOCK WAIT' AND t.trx_query LIKE 'INSERT INTO %s %%'""";

    private final JdbcTemplate jdbcTemplate;

    private final String countSql;

    private final String tableName;

    ProcessedEvents(JdbcTemplate jdbcTemplate, String tableName) {
        this.jdbcTemplate = jdbcTemplate;
        this.countSql = COUNT.formatted(tableName);
        this.tableName = tableName;
    }

    /** How many rows record the event: 1 once it was processed, 0 before or after a rollback. */
    public int rows(UUID eventId) {
        Integer rows = this.jdbcTemplate.queryForObject(this.countSql, Integer.class, eventId);
        return rows != null ? rows : 0;
    }

    /** How many claims are waiting, right now, for another transaction's claim of the same event to end. */
    public int blockedClaims() {
        boolean mariaDb = Boolean.TRUE.equals(this.jdbcTemplate.execute((ConnectionCallback<Boolean>)
                connection -> connection.getMetaData().getDatabaseProductName().equals("MariaDB")));
        String sql = (mariaDb ? BLOCKED_CLAIMS_MARIADB : BLOCKED_CLAIMS).formatted(this.tableName);
        Integer blocked = this.jdbcTemplate.queryForObject(sql, Integer.class);
        return blocked != null ? blocked : 0;
    }
}
