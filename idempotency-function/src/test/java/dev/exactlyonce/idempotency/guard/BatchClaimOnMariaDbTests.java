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
 * The batch claim of {@link BatchClaimTests} on MariaDB: one statement for the batch, in the keys' order, so that
 * batches sharing ids wait for each other and never deadlock.
 */
@TestPropertySource(properties = "spring.flyway.locations=classpath:db/migration-mariadb")
class BatchClaimOnMariaDbTests extends BatchClaimTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("batch");

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
}
