package dev.exactlyonce.idempotency.observability;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * "Was event X applied here?", answered by the {@code idempotency} endpoint on each database the library supports,
 * with the tables its schema script creates: the event's claims, the dead letters the guard recorded of it (waiting, or
 * taken back), and its row in the service's outbox; nothing of an event the service never saw.
 */
class EventLookupTests {

    private static final IdempotencyProperties PROPERTIES =
            Binder.get(new StandardEnvironment()).bindOrCreate("idempotency", IdempotencyProperties.class);

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void anEventIsShownWithItsClaimsItsDeadLettersAndItsOutboxRow(String database) {
        DataSource dataSource = dataSource(database);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        UUID eventId = UuidV7.generate();
        byte[] body = "{\"a\":1}".getBytes(UTF_8);
        Dialect.of(dataSource)
                .deadLetters(jdbc, "processed_event", Duration.ofDays(14))
                .record("things-in-0", eventId, "test.thing.happened.v1", body, Duration.ZERO);
        jdbc.update(
                "INSERT INTO processed_event (event_id, scope, event_name) VALUES (?, 'recordThing', ?)",
                eventId,
                "test.thing.happened.v1");
        jdbc.update(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES (?, ?, ?, ?, %s)"
                        .formatted(database.equals("postgresql") ? "CAST(? AS jsonb)" : "?"),
                eventId,
                "events",
                "thing-1",
                "test.thing.happened.v1",
                "{\"a\":1}");
        UUID unknown = UuidV7.generate();

        IdempotencyEndpoint endpoint = new IdempotencyEndpoint(dataSource, PROPERTIES);
        IdempotencyEndpoint.Lookup lookup = endpoint.lookup(eventId);

        assertThat(lookup.claims()).singleElement().satisfies(claim -> {
            assertThat(claim.scope()).isEqualTo("recordThing");
            assertThat(claim.eventName()).isEqualTo("test.thing.happened.v1");
            assertThat(claim.processedAt()).isNotNull();
        });
        assertThat(lookup.deadLetters()).singleElement().satisfies(deadLetter -> {
            assertThat(deadLetter.binding()).isEqualTo("things-in-0");
            assertThat(deadLetter.takenBackAt()).as("waiting").isNull();
        });
        assertThat(lookup.emitted()).isNotNull().satisfies(emitted -> {
            assertThat(emitted.key()).isEqualTo("thing-1");
            assertThat(emitted.publishedAt()).as("not yet published").isNull();
            assertThat(emitted.parkedAt()).isNull();
        });
        assertThat(endpoint.lookup(unknown))
                .isEqualTo(new IdempotencyEndpoint.Lookup(unknown, List.of(), List.of(), null));
    }

    /** The status lists the dead letters that have waited longest, oldest first, with when each was dead-lettered. */
    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void theStatusListsTheDeadLettersWaitingOldestFirst(String database) {
        DataSource dataSource = dataSource(database);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        DeadLetterRecords records = Dialect.of(dataSource).deadLetters(jdbc, "processed_event", Duration.ofDays(14));
        UUID older = UuidV7.generate();
        UUID newer = UuidV7.generate();
        UUID takenBack = UuidV7.generate();
        byte[] body = "{}".getBytes(UTF_8);
        for (UUID eventId : List.of(newer, older, takenBack)) {
            records.record("things-in-0", eventId, "test.thing.happened.v1", body, Duration.ZERO);
        }
        jdbc.update(
                "UPDATE processed_event_dead_letter SET dead_lettered_at = dead_lettered_at - INTERVAL '1' HOUR"
                        + " WHERE event_id = ?",
                database.equals("postgresql") ? older : older.toString());
        records.takenBack("things-in-0", takenBack, "test.thing.happened.v1", body);

        IdempotencyEndpoint.DeadLetters deadLetters =
                new IdempotencyEndpoint(dataSource, PROPERTIES).status().deadLetters();

        assertThat(deadLetters).isNotNull();
        assertThat(deadLetters.waiting()).isEqualTo(2);
        assertThat(deadLetters.oldest())
                .extracting(IdempotencyEndpoint.Waiting::eventId)
                .containsExactly(older, newer);
        assertThat(deadLetters.oldest().get(0).deadLetteredAt()).isEqualTo(deadLetters.oldestDeadLetteredAt());
    }

    private static DataSource dataSource(String database) {
        TestDatabase created = database.equals("mariadb")
                ? TestMariaDb.newDatabase("eventlookup")
                : TestPostgres.newDatabase("eventlookup");
        DataSource dataSource = new DriverManagerDataSource(created.jdbcUrl(), created.username(), created.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-" + database + ".sql"))
                .execute(dataSource);
        return dataSource;
    }
}
