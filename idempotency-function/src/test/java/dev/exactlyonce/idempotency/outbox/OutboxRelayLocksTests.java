package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The relay's partition locks on PostgreSQL belong to the outbox table, not to the schema a session names first: two
 * services that reach one {@code outbox_event} through different {@code search_path}s share its partitions, so that
 * their relays never publish a key at once.
 */
class OutboxRelayLocksTests {

    private static final TestDatabase database = TestPostgres.newDatabase("outboxlocks");

    @BeforeAll
    static void oneOutboxTwoSchemas() {
        DriverManagerDataSource dataSource =
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(dataSource);
        new JdbcTemplate(dataSource).execute("CREATE SCHEMA service_a; CREATE SCHEMA service_b");
    }

    @Test
    void twoRelaysReachingOneOutboxThroughDifferentSchemasShareItsPartitionLocks() {
        TransactionTemplate first = transactions("service_a, public");
        JdbcTemplate firstJdbc = jdbc(first);
        TransactionTemplate second = transactions("service_b, public");
        JdbcTemplate secondJdbc = jdbc(second);

        List<Integer> lockedBySecond = first.execute(status -> {
            assertThat(PostgresOutbox.INSTANCE.lockPartitions(firstJdbc, List.of(7, 8)))
                    .containsExactly(7, 8);
            return second.execute(inner -> PostgresOutbox.INSTANCE.lockPartitions(secondJdbc, List.of(7, 8, 9)));
        });

        assertThat(lockedBySecond)
                .as("the partitions the second relay got while the first held 7 and 8")
                .containsExactly(9);
    }

    private static TransactionTemplate transactions(String searchPath) {
        DriverManagerDataSource dataSource = new DriverManagerDataSource(
                database.jdbcUrl() + (database.jdbcUrl().contains("?") ? "&" : "?") + "currentSchema="
                        + searchPath.replace(" ", ""),
                database.username(),
                database.password());
        return new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    }

    private static JdbcTemplate jdbc(TransactionTemplate transactions) {
        return new JdbcTemplate(((DataSourceTransactionManager) transactions.getTransactionManager()).getDataSource());
    }
}
