package dev.exactlyonce.idempotency;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Optional;
import java.util.function.Function;
import javax.sql.DataSource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;

/**
 * Runs a piece of work that at most one instance of the service may run at a time (the purge, the partition
 * maintenance) on a connection of its own, in auto-commit, while holding a PostgreSQL session advisory lock. The lock
 * goes with the connection: an instance that dies never keeps it.
 */
final class SessionLock {

    private static final String LOCK = "SELECT pg_try_advisory_lock(hashtext(?), hashtext(?))";

    private static final String UNLOCK = "SELECT pg_advisory_unlock(hashtext(?), hashtext(?))";

    private final DataSource dataSource;

    private final String name;

    private final String tableName;

    /** The lock of {@code name} (such as {@code dev.exactlyonce.idempotency.purge}) for the table. */
    SessionLock(DataSource dataSource, String name, String tableName) {
        this.dataSource = dataSource;
        this.name = name;
        this.tableName = tableName;
    }

    /** The work's result, or nothing when another instance holds the lock. */
    <T> Optional<T> runIfFree(Function<JdbcTemplate, T> work) throws SQLException {
        try (Connection connection = this.dataSource.getConnection()) {
            connection.setAutoCommit(true);
            JdbcTemplate jdbc = new JdbcTemplate(new SingleConnectionDataSource(connection, true));
            if (!Boolean.TRUE.equals(jdbc.queryForObject(LOCK, Boolean.class, this.name, this.tableName))) {
                return Optional.empty();
            }
            try {
                return Optional.of(work.apply(jdbc));
            } finally {
                jdbc.queryForObject(UNLOCK, Boolean.class, this.name, this.tableName);
            }
        }
    }
}
