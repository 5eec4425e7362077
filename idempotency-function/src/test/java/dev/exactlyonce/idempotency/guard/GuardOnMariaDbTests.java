package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.sql.Connection;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.test.context.TestPropertySource;

/**
 * The guarantees of {@link GuardThroughTheBinderTests} on MariaDB: the same tests, on the same path (test binder,
 * transaction per message, guard and business function), the service's tables migrated by Flyway from MariaDB's SQL.
 */
@TestPropertySource(properties = "spring.flyway.locations=classpath:db/migration-mariadb")
class GuardOnMariaDbTests extends GuardThroughTheBinderTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("guard");

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

    /**
     * Not run here (an override without {@code @Test}): it makes a commit fail with a deferred constraint, and MariaDB
     * checks constraints at each statement. A failed transaction's rollback is walked by the other tests.
     */
    @Override
    void aCommitThePostgresRefusesRollsBackTheClaimAndTheRetryAppliesTheEventOnce() {}
}
