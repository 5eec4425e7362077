package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestPostgres;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * On PostgreSQL the relay reads the rows committed since its last read by the transaction that wrote them
 * ({@code written_xid}, which a trigger sets on a row made unpublished again): a table made by a team's own script from
 * an earlier release lacks them, and every run would fail, or miss rows. An instance that relays refuses to start on
 * it, and says what to add.
 */
class OutboxSchemaOnPostgresTests {

    @Test
    void theLibrarysSchemaHasWhatTheRelayReads() {
        DataSource dataSource = schema();

        assertThatCode(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .doesNotThrowAnyException();
    }

    @Test
    void aTableWithoutTheWritingTransactionIsRefusedWhereTheRelayRuns() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("ALTER TABLE outbox_event DROP COLUMN written_xid");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("no written_xid column")
                .satisfies(refusal -> assertThat(refusal.action()).contains("V9__outbox_written_xid.sql"));
        assertThatCode(() -> new OutboxPublisherRegistration(dataSource, false).afterPropertiesSet())
                .as("an instance that leaves the outbox to another process")
                .doesNotThrowAnyException();
    }

    @Test
    void aTableWhoseWritingTransactionHasNoDefaultIsRefused() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("ALTER TABLE outbox_event ALTER COLUMN written_xid DROP DEFAULT");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("defaulting to txid_current()");
    }

    @Test
    void aTableWithoutTheTriggerOfRowsUnpublishedAgainIsRefused() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("DROP TRIGGER outbox_event_unpublished ON outbox_event");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("no enabled trigger outbox_event_unpublished");
    }

    @Test
    void aTableWhoseTriggerIsDisabledIsRefused() {
        DataSource dataSource = schema();
        new JdbcTemplate(dataSource).update("ALTER TABLE outbox_event DISABLE TRIGGER outbox_event_unpublished");

        assertThatExceptionOfType(StartupRefusal.class)
                .isThrownBy(() -> new OutboxPublisherRegistration(dataSource, true).afterPropertiesSet())
                .withMessageContaining("no enabled trigger outbox_event_unpublished");
    }

    private static DataSource schema() {
        var database = TestPostgres.newDatabase("outboxschema");
        DriverManagerDataSource dataSource =
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(dataSource);
        return dataSource;
    }
}
