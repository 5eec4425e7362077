package dev.exactlyonce.shipping;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * {@link TrackOrderStatusTests} on MariaDB: the service's own tables from {@code db/migration/mariadb}, and its
 * versioned upsert in MariaDB's SQL (an event older than the stored version changes nothing).
 */
@Import(TrackOrderStatusOnMariaDbTests.OnMariaDb.class)
class TrackOrderStatusOnMariaDbTests extends TrackOrderStatusTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("shipping");

    /** The MariaDB database, in place of the PostgreSQL one the inherited tests register as properties. */
    @TestConfiguration(proxyBeanMethods = false)
    static class OnMariaDb {

        @Bean
        JdbcConnectionDetails mariaDb() {
            return database.connectionDetails();
        }
    }

    @Autowired
    DataSource dataSource;

    @Test
    void theseTestsRunOnMariaDb() throws SQLException {
        try (Connection connection = this.dataSource.getConnection()) {
            assertThat(connection.getMetaData().getDatabaseProductName()).isEqualTo("MariaDB");
        }
    }
}
