package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * How long the relay holds back the key of a row the broker refused for what it is, on each database: the relay's
 * {@code first-hold} doubling with each attempt up to {@code longest-hold}, as every wait of the relay; parked at
 * {@code max-attempts}.
 */
class RefusedRowBackOffTests {

    private static final Duration FIRST = Duration.ofMillis(250);

    private static final Duration LONGEST = Duration.ofMillis(1_500);

    private static final int MAX_ATTEMPTS = 5;

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void aRefusedRowsKeyWaitsTheFirstHoldDoublingUpToTheLongestThenTheRowIsParked(String database) {
        TestDatabase server = database.equals("postgresql")
                ? TestPostgres.newDatabase("refusedbackoff")
                : TestMariaDb.newDatabase("refusedbackoff");
        // One connection: on MariaDB the wait is read by a second statement, which must not wait for a login.
        SingleConnectionDataSource connection =
                new SingleConnectionDataSource(server.jdbcUrl(), server.username(), server.password(), true);
        try {
            assertTheWaits(new JdbcTemplate(connection), database);
        } finally {
            connection.destroy();
        }
    }

    private static void assertTheWaits(JdbcTemplate jdbc, String database) {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-" + database + ".sql"))
                .execute(jdbc.getDataSource());
        UUID id = UUID.randomUUID();
        jdbc.update(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES (?, ?, ?, ?, '{}')",
                database.equals("postgresql") ? id : id.toString(),
                "events",
                "key-1",
                "test.thing.noticed.v1");
        OutboxStatements statements = database.equals("postgresql") ? PostgresOutbox.INSTANCE : MariaDbOutbox.INSTANCE;
        OutboxSender.Refusal refusal = new OutboxSender.Refusal(
                new OutboxSender.Row(id, "events", "key-1", "test.thing.noticed.v1", "{}", Instant.now()),
                "reply-code=406");

        List<Duration> waits = new ArrayList<>();
        List<Boolean> parked = new ArrayList<>();
        for (int attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
            statements.holdBack(jdbc, List.of(refusal), MAX_ATTEMPTS, FIRST, LONGEST, row -> {
                waits.add(Duration.ofMillis((long) (row.getDouble(5) * 1000)));
                parked.add(row.getBoolean(4));
            });
        }

        // Each wait as the database measured it just after setting it: a little short, never longer.
        assertThat(waits).hasSize(MAX_ATTEMPTS);
        List<Duration> expected = List.of(FIRST, FIRST.multipliedBy(2), FIRST.multipliedBy(4), LONGEST, LONGEST);
        for (int i = 0; i < MAX_ATTEMPTS; i++) {
            assertThat(waits.get(i))
                    .as("the wait after attempt %d", i + 1)
                    .isBetween(expected.get(i).multipliedBy(6).dividedBy(10), expected.get(i));
        }
        assertThat(parked).containsExactly(false, false, false, false, true);
    }
}
