package dev.exactlyonce.idempotency.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Optional;
import java.util.function.Function;
import javax.sql.DataSource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;

/**
 * Runs work that one instance at a time may run (the purge, the partition maintenance, the scopes' reconciliation) on a
 * connection of its own, in auto-commit, under a session lock, which an instance that dies never keeps.
 */
public final class SessionLock {

    private final DataSource dataSource;

    private final String name;

    private final String tableName;

    /** The lock of {@code name} (such as {@code dev.exactlyonce.idempotency.purge}) for the table. */
    public SessionLock(DataSource dataSource, String name, String tableName) {
        this.dataSource = dataSource;
        this.name = name;
        this.tableName = tableName;
    }

    /** The work's result, or nothing when another instance holds the lock. */
    public <T> Optional<T> runIfFree(Function<JdbcTemplate, T> work) throws SQLException {
        return run(false, work);
    }

    /** Waits for the lock, then runs the work on the lock's connection; released after the work's commit. */
    <T> T runWhenFree(Function<JdbcTemplate, T> work) throws SQLException {
        return run(true, work).orElseThrow();
    }

    public Dialect dialect() {
        return Dialect.of(this.dataSource);
    }

    private <T> Optional<T> run(boolean wait, Function<JdbcTemplate, T> work) throws SQLException {
        try (Connection connection = this.dataSource.getConnection()) {
            connection.setAutoCommit(true);
            // Under REPEATABLE READ (MariaDB's default) a purge's DELETE would also lock the gap after the rows it
            // deletes, where the outbox's writers insert.
            int isolation = connection.getTransactionIsolation();
            connection.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
            JdbcTemplate jdbc = new JdbcTemplate(new SingleConnectionDataSource(connection, true));
            Dialect dialect = dialect();
            if (!dialect.lock(jdbc, this.name, this.tableName, wait)) {
                return Optional.empty();
            }
            try {
                return Optional.of(work.apply(jdbc));
            } finally {
                dialect.unlock(jdbc, this.name, this.tableName);
                connection.setTransactionIsolation(isolation);
            }
        }
    }
}
