package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.JdbcTransactionObjectSupport;
import org.springframework.transaction.TransactionDefinition;

/**
 * The relay's runs: READ COMMITTED transactions whose session the server ends once idle inside one longer than the
 * limit, so that a frozen relay gives up its partitions' locks. The limit is lifted before the connection goes back to
 * the pool. See docs/outbox.md ("The relay").
 */
final class RelayTransactions extends DataSourceTransactionManager {

    private static final Logger logger = LoggerFactory.getLogger(RelayTransactions.class);

    private final Duration idleLimit;

    /** The session's own idle limit, to set back after the run (MariaDB's is the session's). */
    private final ThreadLocal<String> previousLimit = new ThreadLocal<>();

    RelayTransactions(DataSource dataSource, Duration idleLimit) {
        super(dataSource);
        this.idleLimit = idleLimit;
    }

    @Override
    protected void prepareTransactionalConnection(Connection connection, TransactionDefinition definition)
            throws SQLException {
        super.prepareTransactionalConnection(connection, definition);
        String previous = statements().limitIdleTime(connection, this.idleLimit);
        if (previous != null) {
            this.previousLimit.set(previous);
        }
    }

    @Override
    protected void doCleanupAfterCompletion(Object transaction) {
        String previous = this.previousLimit.get();
        this.previousLimit.remove();
        if (previous != null) {
            Connection connection = ((JdbcTransactionObjectSupport) transaction)
                    .getConnectionHolder()
                    .getConnection();
            try {
                statements().liftIdleLimit(connection, previous);
            } catch (SQLException | RuntimeException ex) {
                // The session ended (the limit passed, the connection lost), or it did not and would keep the limit
                // in the pool: the connection is closed either way, and the pool opens another.
                logger.warn(
                        "Could not set the outbox relay's session idle limit back; its connection is closed: {}",
                        ex.toString());
                try {
                    connection.abort(Runnable::run);
                } catch (SQLException | RuntimeException closing) {
                    logger.debug("Could not close it: {}", closing.toString());
                }
            }
        }
        super.doCleanupAfterCompletion(transaction);
    }

    private OutboxStatements statements() {
        return OutboxStatements.of(Dialect.of(obtainDataSource()));
    }
}
