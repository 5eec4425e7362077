package dev.exactlyonce.idempotency.jdbc;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * The records of the events a guard dead-lettered, on each database the library supports, with the tables its
 * schema script creates: a record vouches for its binding, event id, name and body only, once (a second record of the
 * same is no error), and for the dead letters' retention only; the purge deletes what is older.
 */
class DeadLetterRecordsTests {

    private static final Duration RETENTION = Duration.ofDays(14);

    private static final String NAME = "test.thing.happened.v1";

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void aRecordVouchesForItsBindingIdNameAndBodyWithinTheRetention(String database) {
        DataSource dataSource = dataSource(database);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        DeadLetterRecords records = Dialect.of(dataSource).deadLetters(jdbc, "processed_event", RETENTION);
        UUID eventId = UuidV7.generate();
        byte[] body = "{\"a\":1}".getBytes(UTF_8);

        records.record("things-in-0", eventId, NAME, body, Duration.ZERO);
        records.record("things-in-0", eventId, NAME, body, Duration.ZERO);

        assertThat(records.recorded("things-in-0", eventId, NAME, body)).isTrue();
        assertThat(records.recorded("things-in-0", eventId, NAME, "{\"a\":2}".getBytes(UTF_8)))
                .as("another body")
                .isFalse();
        assertThat(records.recorded("things-in-0", eventId, "test.other.happened.v1", body))
                .as("another name")
                .isFalse();
        assertThat(records.recorded("others-in-0", eventId, NAME, body))
                .as("another binding")
                .isFalse();
        assertThat(records.recorded("things-in-0", UuidV7.generate(), NAME, body))
                .as("another id")
                .isFalse();

        jdbc.update("UPDATE processed_event_dead_letter SET dead_lettered_at = dead_lettered_at - "
                + (database.equals("mariadb") ? "INTERVAL 15 DAY" : "interval '15 days'"));

        assertThat(records.recorded("things-in-0", eventId, NAME, body))
                .as("older than the retention")
                .isFalse();
        assertThat(records.purge()).isEqualTo(1);
    }

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void theDeadLettersStillWaitingAreThoseNoReplayOfWhichWasAppliedWithinTheRetention(String database) {
        DataSource dataSource = dataSource(database);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        DeadLetterRecords records = Dialect.of(dataSource).deadLetters(jdbc, "processed_event", RETENTION);
        UUID older = UuidV7.generate();
        UUID newer = UuidV7.generate();
        UUID expired = UuidV7.generate();
        byte[] body = "{\"a\":1}".getBytes(UTF_8);
        assertThat(records.waiting()).isEqualTo(new DeadLetterRecords.Waiting(0, null));

        records.record("things-in-0", expired, NAME, body, Duration.ZERO);
        jdbc.update("UPDATE processed_event_dead_letter SET dead_lettered_at = dead_lettered_at - "
                + (database.equals("mariadb") ? "INTERVAL 15 DAY" : "interval '15 days'"));
        records.record("things-in-0", older, NAME, body, Duration.ZERO);
        jdbc.update(
                "UPDATE processed_event_dead_letter SET dead_lettered_at = dead_lettered_at - "
                        + (database.equals("mariadb") ? "INTERVAL 10 DAY" : "interval '10 days'")
                        + " WHERE event_id = ?",
                database.equals("mariadb") ? older.toString() : older);
        records.record("things-in-0", newer, NAME, body, Duration.ZERO);

        DeadLetterRecords.Waiting waiting = records.waiting();
        assertThat(waiting.count()).as("the two within the retention").isEqualTo(2);
        assertThat(Duration.between(waiting.oldest(), Instant.now()))
                .as("the age of the older")
                .isBetween(
                        Duration.ofDays(10).minusMinutes(5), Duration.ofDays(10).plusMinutes(5));

        records.takenBack("things-in-0", older, NAME, body);

        waiting = records.waiting();
        assertThat(waiting.count()).as("the older taken back").isEqualTo(1);
        assertThat(Duration.between(waiting.oldest(), Instant.now())).isLessThan(Duration.ofMinutes(5));
        assertThat(records.recorded("things-in-0", older, NAME, body))
                .as("a copy of the replay, vouched for still")
                .isTrue();
    }

    private static DataSource dataSource(String database) {
        TestDatabase created = database.equals("mariadb")
                ? TestMariaDb.newDatabase("deadletters")
                : TestPostgres.newDatabase("deadletters");
        DataSource dataSource = new DriverManagerDataSource(created.jdbcUrl(), created.username(), created.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-" + database + ".sql"))
                .execute(dataSource);
        return dataSource;
    }
}
