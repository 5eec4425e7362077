package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.context.TestPropertySource;

/**
 * The outbox of {@link OutboxOnRabbitIT} on MariaDB: the write in the effect's transaction, the key locks (rows of
 * {@code outbox_key}, locked until the commit) that keep a key's events in commit order, the relay's partition locks
 * ({@code FOR UPDATE SKIP LOCKED}) shared by two relays, gap safety, refusals and republication, on a real RabbitMQ.
 */
@TestPropertySource(properties = "spring.flyway.locations=classpath:db/migration-mariadb")
@Import(OutboxOnRabbitWithMariaDbIT.OnMariaDb.class)
class OutboxOnRabbitWithMariaDbIT extends OutboxOnRabbitIT {

    private static final TestDatabase database = TestMariaDb.newDatabase("outbox");

    /** The MariaDB database, in place of the PostgreSQL one the inherited tests register as properties. */
    @TestConfiguration(proxyBeanMethods = false)
    static class OnMariaDb {

        @Bean
        JdbcConnectionDetails mariaDb() {
            return database.connectionDetails();
        }
    }

    @Test
    void theseTestsRunOnMariaDb() throws SQLException {
        try (Connection connection = this.dataSource.getConnection()) {
            assertThat(connection.getMetaData().getDatabaseProductName()).isEqualTo("MariaDB");
        }
    }

    /** A transaction waiting for a row lock (on MariaDB, a key's lock is a row of {@code outbox_key}). */
    @Override
    int writersWaitingForALock() {
        Integer waiting = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM information_schema.innodb_trx t"
                        + " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
                        + " WHERE p.db = DATABASE() AND t.trx_state = 'LOCK WAIT'",
                Integer.class);
        return waiting != null ? waiting : 0;
    }

    @Override
    void sleep(int seconds) {
        this.jdbcTemplate.execute("SELECT SLEEP(" + seconds + ")");
    }

    @Override
    void backdate(UUID id, int days) {
        this.jdbcTemplate.update(
                "UPDATE outbox_event SET occurred_at = NOW(6) - INTERVAL ? DAY WHERE id = ?", days, id.toString());
    }

    /**
     * Not here: MariaDB has no lock table shared by every session (InnoDB keeps a transaction's row locks with the
     * transaction), which is what a transaction of many keys must not fill on PostgreSQL.
     */
    @Override
    void aTransactionEmittingTenThousandDistinctKeysTakesNoPlaceInTheSharedLockTablePerKey() {}

    /**
     * Not here: it fails the relay's mark with a PL/pgSQL trigger. The path (a run whose mark fails publishes again
     * with the same ids) is the relay's, the same on both databases.
     */
    @Override
    void aRunWhoseCommitFailsAfterPublishingLeavesItsRowsUnpublishedAndTheNextRunPublishesThemAgainWithTheirIds() {}
}
