package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * The keys a relay reads on PostgreSQL once it read every key's head: those of the rows committed since its last read,
 * whatever order their positions committed in, and those a republication made unpublished again.
 */
class PendingKeysTests {

    private final TestDatabase database = TestPostgres.newDatabase("pendingkeys");

    private final JdbcTemplate jdbc = new JdbcTemplate(
            new DriverManagerDataSource(this.database.jdbcUrl(), this.database.username(), this.database.password()));

    private final PendingKeys keys = new PendingKeys();

    @BeforeEach
    void outbox() {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(this.jdbc.getDataSource());
    }

    @Test
    void aRowThatCommitsAfterARowWrittenLaterIsRead() throws SQLException {
        write("old");
        assertThat(headKeys()).containsExactly("old");
        try (Connection first = connection()) {
            first.setAutoCommit(false);
            write(first, "first");
            write("second");

            assertThat(headKeys()).containsExactlyInAnyOrder("old", "second");
            first.commit();
        }

        assertThat(headKeys())
                .as("the row written first, committed after the read that found the second")
                .containsExactlyInAnyOrder("old", "first", "second");
    }

    @Test
    void rowsPublishedThenRepublishedAreReadAgain() {
        Timestamp from = this.jdbc.queryForObject("SELECT now() - interval '1 second'", Timestamp.class);
        write("replayed");
        write("replayed");
        assertThat(headKeys()).containsExactly("replayed");
        this.jdbc.update("UPDATE outbox_event SET published_at = now()");
        assertThat(headKeys()).isEmpty();
        write("later");
        assertThat(headKeys()).containsExactly("later");

        PostgresOutbox.INSTANCE.republish(
                this.jdbc, from, this.jdbc.queryForObject("SELECT now() + interval '1 second'", Timestamp.class));

        assertThat(this.keys
                        .read(PostgresOutbox.INSTANCE, this.jdbc, OutboxRelay.MAX_KEYS)
                        .heads())
                .extracting(OutboxStatements.Head::key, OutboxStatements.Head::position)
                .as("the first of the republished rows heads its key again")
                .contains(org.assertj.core.groups.Tuple.tuple("replayed", 1L));
    }

    @Test
    void pastTheKeysItTracksEveryKeysHeadIsReadAgain() {
        PendingKeys two = new PendingKeys(2);
        write("a");
        write("b");
        assertThat(headKeys(two)).containsExactly("a", "b");
        assertThat(headKeys(two)).as("read past their heads, both tracked").containsExactly("a", "b");

        write("c");

        assertThat(headKeys(two))
                .as("a third key, which it cannot track, read with every key's head")
                .containsExactlyInAnyOrder("a", "b", "c");
        this.jdbc.update("UPDATE outbox_event SET published_at = now() WHERE aggregateid <> 'c'");
        assertThat(headKeys(two)).containsExactly("c");
        write("d");
        assertThat(headKeys(two)).containsExactlyInAnyOrder("c", "d");
    }

    @Test
    void beyondTheMostKeysARunReadsTheNextRunGoesOnPastTheLastItRead() {
        List.of("a", "b", "c", "d", "e").forEach(this::write);
        assertThat(this.keys.read(PostgresOutbox.INSTANCE, this.jdbc, 10).heads())
                .hasSize(5);

        PendingKeys.Read first = this.keys.read(PostgresOutbox.INSTANCE, this.jdbc, 2);
        PendingKeys.Read second = this.keys.read(PostgresOutbox.INSTANCE, this.jdbc, 2);
        PendingKeys.Read third = this.keys.read(PostgresOutbox.INSTANCE, this.jdbc, 2);

        assertThat(List.of(first, second, third))
                .extracting(read ->
                        read.heads().stream().map(OutboxStatements.Head::key).toList())
                .containsExactly(List.of("a", "b"), List.of("c", "d"), List.of("e", "a"));
        assertThat(List.of(first, second, third))
                .extracting(PendingKeys.Read::more)
                .containsExactly(true, true, true);
    }

    @Test
    void rowsAnOperatorMakesUnpublishedByHandAreReadAgain() {
        write("replayed");
        assertThat(headKeys()).containsExactly("replayed");
        this.jdbc.update("UPDATE outbox_event SET published_at = now()");
        assertThat(headKeys()).isEmpty();

        this.jdbc.update("UPDATE outbox_event SET published_at = NULL");

        assertThat(headKeys()).containsExactly("replayed");
    }

    private List<String> headKeys() {
        return headKeys(this.keys);
    }

    private List<String> headKeys(PendingKeys keys) {
        return keys.read(PostgresOutbox.INSTANCE, this.jdbc, OutboxRelay.MAX_KEYS).heads().stream()
                .map(OutboxStatements.Head::key)
                .toList();
    }

    private void write(String key) {
        try (Connection connection = connection()) {
            write(connection, key);
        } catch (SQLException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private static void write(Connection connection, String key) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.execute("INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES"
                    + " (gen_random_uuid(), 'events', '" + key + "', 'test.thing.noticed.v1', '{}')");
        }
    }

    private Connection connection() throws SQLException {
        return DriverManager.getConnection(this.database.jdbcUrl(), this.database.username(), this.database.password());
    }
}
