package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A relay whose database connection goes silent in the middle of a run (the network frozen under it, its process
 * paused) gives its partitions up to the other relays within its idle limit, on each database: the server ends its
 * session. Back, it can no longer mark what it published.
 */
class OutboxRelayIdleLimitTests {

    private static final Duration IDLE_LIMIT = Duration.ofSeconds(2);

    abstract static class OnADatabase {

        abstract TestDatabase database();

        abstract String host();

        abstract int port();

        abstract String schema();

        @Test
        void aRunWhoseConnectionGoesSilentGivesItsPartitionsUpWithinTheIdleLimit() {
            TestDatabase database = database();
            new ResourceDatabasePopulator(new ClassPathResource(schema())).execute(dataSource(database.jdbcUrl()));
            OutboxStatements sql =
                    OutboxStatements.of(dev.exactlyonce.idempotency.jdbc.Dialect.of(dataSource(database.jdbcUrl())));
            try (TcpProxy proxy = TcpProxy.to(host(), port())) {
                DataSource silent =
                        dataSource(database.jdbcUrl().replaceFirst("//[^/]+/", "//127.0.0.1:" + proxy.port() + "/"));
                RelayTransactions runs = new RelayTransactions(silent, IDLE_LIMIT);
                DefaultTransactionDefinition readCommitted = new DefaultTransactionDefinition();
                readCommitted.setIsolationLevel(TransactionDefinition.ISOLATION_READ_COMMITTED);
                TransactionStatus run = runs.getTransaction(readCommitted);
                assertThat(sql.lockPartitions(new JdbcTemplate(silent), List.of(3, 4)))
                        .containsExactly(3, 4);

                proxy.freeze();

                DataSource otherDataSource = dataSource(database.jdbcUrl());
                TransactionTemplate other = new TransactionTemplate(new DataSourceTransactionManager(otherDataSource));
                JdbcTemplate otherJdbc = new JdbcTemplate(otherDataSource);
                List<Integer> lockedAtOnce = other.execute(status -> sql.lockPartitions(otherJdbc, List.of(3, 4)));
                assertThat(lockedAtOnce)
                        .as("the partitions are the silent run's while it is in its idle limit")
                        .isEmpty();
                await().atMost(IDLE_LIMIT.plusSeconds(20))
                        .alias("another relay takes the silent run's partitions")
                        .until(
                                () -> other.execute(status -> sql.lockPartitions(otherJdbc, List.of(3, 4))),
                                locked -> locked.equals(List.of(3, 4)));

                proxy.thaw();
                assertThatThrownBy(() -> runs.commit(run))
                        .as("the silent run, back, commits nothing: its session was ended")
                        .isInstanceOf(RuntimeException.class);
            }
        }

        private DataSource dataSource(String url) {
            return new DriverManagerDataSource(
                    url, database().username(), database().password());
        }
    }

    @Nested
    class OnPostgreSql extends OnADatabase {

        private static final TestDatabase database = TestPostgres.newDatabase("relayidle");

        @Override
        TestDatabase database() {
            return database;
        }

        @Override
        String host() {
            return TestPostgres.server().host();
        }

        @Override
        int port() {
            return TestPostgres.server().port();
        }

        @Override
        String schema() {
            return "dev/exactlyonce/idempotency/schema-postgresql.sql";
        }
    }

    @Nested
    class OnMariaDb extends OnADatabase {

        private static final TestDatabase database = TestMariaDb.newDatabase("relayidle");

        @Override
        TestDatabase database() {
            return database;
        }

        @Override
        String host() {
            return TestMariaDb.server().host();
        }

        @Override
        int port() {
            return TestMariaDb.server().port();
        }

        @Override
        String schema() {
            return "dev/exactlyonce/idempotency/schema-mariadb.sql";
        }
    }
}
