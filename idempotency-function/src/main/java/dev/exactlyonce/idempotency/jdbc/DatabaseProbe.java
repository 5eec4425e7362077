package dev.exactlyonce.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.HikariPoolMXBean;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.Failures;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.util.Set;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.util.ClassUtils;

/**
 * Checks whether the database takes the guard's write again: a claim of its own, rolled back, so that a read-only,
 * full or refusing server does not pass. See docs/operations.md, "When things go wrong".
 */
public final class DatabaseProbe {

    /** The scope of the probe's claims: no binding claims under it, and none is ever committed. */
    static final String SCOPE = "__idempotency_probe";

    /** Sessions the server ended, or a server that took writes and no longer does. */
    private static final Set<String> STALE_STATES = Set.of("57P01", "57P02", "25006");

    /** A new connection refused: those the pool has may work. */
    private static final Set<String> REFUSED_STATES = Set.of("08001", "08004");

    private static final boolean HIKARI = ClassUtils.isPresent("com.zaxxer.hikari.HikariDataSource", null);

    private final DataSource dataSource;

    private final String tableName;

    private final Duration socketTimeout;

    /** A silent connection fails the check within {@code socketTimeout} (0: no limit), not TCP's timeout. */
    public DatabaseProbe(DataSource dataSource, String tableName, Duration socketTimeout) {
        this.dataSource = dataSource;
        this.tableName = tableName;
        this.socketTimeout = socketTimeout;
    }

    /** {@code null} when a write goes through, else why it does not. */
    @Nullable
    public Exception check() {
        try (Connection connection = this.dataSource.getConnection()) {
            if (!this.socketTimeout.isZero()) {
                // Before anything goes to the server (MariaDB's driver sends the change of auto-commit): the pool
                // resets it when the connection comes back.
                connection.setNetworkTimeout(Runnable::run, (int) this.socketTimeout.toMillis());
            }
            connection.setAutoCommit(false);
            String write = Dialect.of(this.dataSource).probeWrite(this.tableName);
            try (PreparedStatement claim = connection.prepareStatement(write)) {
                claim.setObject(1, UuidV7.generate());
                claim.setString(2, SCOPE);
                claim.executeUpdate();
            } finally {
                connection.rollback();
                connection.setAutoCommit(true);
            }
            return null;
        } catch (SQLException | RuntimeException ex) {
            evictConnectionsIfStale(ex);
            return ex;
        }
    }

    /** Evicts the pool's connections when stale; never for a failure to get one, which would empty a busy pool. */
    public void evictConnectionsIfStale(Throwable failure) {
        if (HIKARI && isStale(failure)) {
            Hikari.softEvict(this.dataSource);
        }
    }

    static boolean isStale(Throwable failure) {
        if (Failures.find(failure, SQLTransientConnectionException.class) != null
                || Failures.find(failure, CannotGetJdbcConnectionException.class) != null) {
            return false;
        }
        return Failures.first(failure, cause -> cause instanceof SQLException sql && isStale(sql)) != null;
    }

    private static boolean isStale(SQLException failure) {
        String state = String.valueOf(failure.getSQLState());
        return STALE_STATES.contains(state)
                || (state.startsWith("08") && !REFUSED_STATES.contains(state))
                || MariaDbDialect.isReadOnly(failure);
    }

    /** How long a borrower waits for a connection (HikariCP's {@code connection-timeout}); zero if unknown. */
    public static Duration connectionWait(DataSource dataSource) {
        return HIKARI ? Hikari.connectionTimeout(dataSource) : Duration.ZERO;
    }

    /** Bounds the PostgreSQL login of a HikariCP pool not started yet, unless set: by default it waits without end. */
    public static void boundLogin(DataSource dataSource, Duration timeout) {
        if (HIKARI && !timeout.isZero() && !timeout.isNegative()) {
            Hikari.boundLogin(dataSource, timeout);
        }
    }

    /** Loaded only when HikariCP is there. */
    private static final class Hikari {

        private static final String LOGIN_TIMEOUT = "loginTimeout";

        static void boundLogin(DataSource dataSource, Duration timeout) {
            if (!(dataSource instanceof HikariDataSource hikari) || hikari.isRunning()) {
                return;
            }
            String url = hikari.getJdbcUrl();
            if (url == null
                    || !url.startsWith("jdbc:postgresql:")
                    || url.contains(LOGIN_TIMEOUT + "=")
                    || hikari.getDataSourceProperties().containsKey(LOGIN_TIMEOUT)) {
                return;
            }
            hikari.addDataSourceProperty(LOGIN_TIMEOUT, Long.toString(Math.max(1, timeout.toSeconds())));
        }

        static Duration connectionTimeout(DataSource dataSource) {
            try {
                return dataSource.isWrapperFor(HikariDataSource.class)
                        ? Duration.ofMillis(
                                dataSource.unwrap(HikariDataSource.class).getConnectionTimeout())
                        : Duration.ZERO;
            } catch (SQLException ex) {
                return Duration.ZERO;
            }
        }

        static void softEvict(DataSource dataSource) {
            try {
                if (dataSource.isWrapperFor(HikariDataSource.class)) {
                    HikariPoolMXBean pool =
                            dataSource.unwrap(HikariDataSource.class).getHikariPoolMXBean();
                    if (pool != null) {
                        pool.softEvictConnections();
                    }
                }
            } catch (SQLException ex) {
                // Not a pool that can say: its connections are validated as it hands them out.
            }
        }
    }
}
