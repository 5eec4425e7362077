package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * On MariaDB the outbox's key locks and the relay's partition locks are rows ({@code outbox_key}, one per key,
 * {@code outbox_relay_lock}, one per partition): a schema made by a team's own script without them would lock nothing
 * (events of one key published out of order) or never publish a partition. An instance refuses to start on it.
 */
class OutboxLockTablesOnMariaDbTests {

    @Test
    void theLibrarysSchemaHasEveryLockRow() {
        DataSource dataSource = schema();

        assertThatCode(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .doesNotThrowAnyException();
    }

    @Test
    void aSchemaWithoutTheKeyTableIsRefused() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("DROP TABLE outbox_key");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("no outbox_key table")
                .satisfies(refusal -> assertThat(refusal.action()).contains("schema-mariadb.sql"));
    }

    @Test
    void aSchemaWithoutTheRelayLockRowsIsRefused() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("DELETE FROM outbox_relay_lock");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("outbox_relay_lock holds 0 of its 256 rows");
    }

    @Test
    void anInstanceThatDoesNotRelayNeedsNoRelayLockRows() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("DELETE FROM outbox_relay_lock");

        assertThatCode(() -> new OutboxPublisherRegistration(dataSource, false).afterPropertiesSet())
                .doesNotThrowAnyException();
    }

    private static DataSource schema() {
        var database = TestMariaDb.newDatabase("outboxlocks");
        DriverManagerDataSource dataSource =
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-mariadb.sql"))
                .execute(dataSource);
        return dataSource;
    }
}
