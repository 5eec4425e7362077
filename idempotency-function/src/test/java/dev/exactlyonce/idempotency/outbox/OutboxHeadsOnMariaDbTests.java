package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * What a run of the relay reads to choose its keys, on MariaDB: the head of each key with unpublished rows, by a loose
 * scan of the pending rows' key index (one step per pending key), however many rows a key holds or once held.
 */
class OutboxHeadsOnMariaDbTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("outboxheads");

    private static final JdbcTemplate jdbc =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private static final String ROWS = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
            SELECT UUID(), 'events', ?, 'test.thing.noticed.v1', '{}' FROM seq_1_to_%d""";

    @BeforeAll
    static void outbox() {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-mariadb.sql"))
                .execute(jdbc.getDataSource());
        jdbc.update(ROWS.formatted(50_000), "parked");
        jdbc.update(ROWS.formatted(50_000), "published");
        for (int key = 0; key < 100; key++) {
            jdbc.update(ROWS.formatted(2), "key-" + key);
        }
        jdbc.update("UPDATE outbox_event SET published_at = NOW(6) WHERE aggregateid = 'published'");
        jdbc.update("""
                UPDATE outbox_event SET attempts = 10, parked_at = NOW(6)
                WHERE aggregateid = 'parked' ORDER BY position LIMIT 1""");
        jdbc.execute("ANALYZE TABLE outbox_event");
    }

    @Test
    void eachKeyWithUnpublishedRowsHasItsHeadAndAParkedOneIsMarked() {
        List<OutboxStatements.Head> heads =
                MariaDbOutbox.INSTANCE.heads(jdbc, null, OutboxRelay.MAX_KEYS).heads();

        assertThat(heads).hasSize(101);
        assertThat(heads)
                .filteredOn(OutboxStatements.Head::parked)
                .extracting(OutboxStatements.Head::key)
                .containsExactly("parked");
    }

    @Test
    void theHeadsAreReadByALooseScanOfThePendingRowsKeyIndex() {
        List<Map<String, Object>> plan = jdbc.queryForList("""
                EXPLAIN SELECT pending_key, MIN(position) FROM outbox_event
                WHERE pending_key > '' GROUP BY pending_key ORDER BY pending_key LIMIT 10000""");

        assertThat(plan)
                .singleElement()
                .satisfies(step -> assertThat(String.valueOf(step.get("Extra"))).contains("Using index for group-by"));
    }

    @Test
    void beyondTheMostKeysARunReadsTheNextReadGoesOnFromTheLastKeyItRead() {
        OutboxStatements.Heads first = MariaDbOutbox.INSTANCE.heads(jdbc, null, 60);
        OutboxStatements.Heads second = MariaDbOutbox.INSTANCE.heads(jdbc, first.next(), 60);

        assertThat(first.heads()).hasSize(60);
        assertThat(second.heads()).hasSize(41);
        assertThat(second.next()).isNull();
    }

    @Test
    void theRowsOfAKeyWhoseHeadIsHeldBackAreNotReadToPublish() {
        List<OutboxStatements.Head> asked =
                MariaDbOutbox.INSTANCE.heads(jdbc, null, OutboxRelay.MAX_KEYS).heads().stream()
                        .filter(head ->
                                head.key().equals("parked") || head.key().equals("key-7"))
                        .toList();

        assertThat(MariaDbOutbox.INSTANCE.pending(jdbc, asked, 10))
                .extracting(OutboxSender.Row::key)
                .containsOnly("key-7");
    }
}
