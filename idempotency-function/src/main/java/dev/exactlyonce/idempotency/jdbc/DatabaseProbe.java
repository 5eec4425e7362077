package dev.exactlyonce.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.HikariPoolMXBean;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.util.ClassUtils;

/**
 * Checks whether the database works again for what the guard does: a write, not a connection alone. It claims an id
 * of its own in the table of processed event ids, in a transaction it rolls back, on a connection of the service's
 * DataSource: a server that accepts connections but is read-only (after a failover), out of disk, or refusing the
 * service's role does not pass. A pool's connections are evicted when an outage begins and after each failed check,
 * so that connections opened before the failure (to a server demoted since, say) are not handed out again.
 */
public final class DatabaseProbe {

    /** The scope of the probe's claims: no binding claims under it, and none is ever committed. */
    static final String SCOPE = "__idempotency_probe";

    private static final boolean HIKARI = ClassUtils.isPresent("com.zaxxer.hikari.HikariDataSource", null);

    private final DataSource dataSource;

    private final String tableName;

    private final Duration socketTimeout;

    /**
     * @param socketTimeout how long the probe's statements wait for the database's answer (0: no limit): a probe whose
     *     connection goes silent fails its check within that long, rather than waiting for TCP's timeout while the
     *     database answers every new connection
     */
    public DatabaseProbe(DataSource dataSource, String tableName, Duration socketTimeout) {
        this.dataSource = dataSource;
        this.tableName = tableName;
        this.socketTimeout = socketTimeout;
    }

    /** {@code null} when a write goes through, else why it does not. */
    @Nullable
    public String check() {
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
            evictConnections();
            return String.valueOf(ex.getMessage());
        }
    }

    /** Lets the pool open new connections for the next borrowers, closing the others as they come back. */
    public void evictConnections() {
        if (HIKARI) {
            Hikari.softEvict(this.dataSource);
        }
    }

    /** Loaded only when HikariCP is there. */
    private static final class Hikari {

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
