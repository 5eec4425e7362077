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
 * The relay's runs: transactions at READ COMMITTED whose session the server ends if it stays idle longer than the
 * limit inside one (a relay whose database connection went silent, or whose process is frozen), so that a relay that
 * cannot go on gives up its partitions' locks to the others within that time, on either database, and finds on its
 * return that its run can no longer mark what it published. The limit is lifted before the connection goes back to
 * the pool.
 */
final class RelayTransactions extends DataSourceTransactionManager {

    private static final Logger logger = LoggerFactory.getLogger(RelayTransactions.class);

    private final Duration idleLimit;

    RelayTransactions(DataSource dataSource, Duration idleLimit) {
        super(dataSource);
        this.idleLimit = idleLimit;
    }

    @Override
    protected void prepareTransactionalConnection(Connection connection, TransactionDefinition definition)
            throws SQLException {
        super.prepareTransactionalConnection(connection, definition);
        statements().limitIdleTime(connection, this.idleLimit);
    }

    @Override
    protected void doCleanupAfterCompletion(Object transaction) {
        try {
            statements()
                    .liftIdleLimit(((JdbcTransactionObjectSupport) transaction)
                            .getConnectionHolder()
                            .getConnection());
        } catch (SQLException | RuntimeException ex) {
            // The session ended (the limit passed, the connection lost): the pool drops the connection.
            logger.debug("Could not lift the idle limit of the outbox relay's session: {}", ex.toString());
        }
        super.doCleanupAfterCompletion(transaction);
    }

    private OutboxStatements statements() {
        return OutboxStatements.of(Dialect.of(obtainDataSource()));
    }
}
