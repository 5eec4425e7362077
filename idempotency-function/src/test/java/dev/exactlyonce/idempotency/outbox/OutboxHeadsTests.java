package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * What a run of the relay reads to choose its keys, on PostgreSQL: the head of each key with unpublished rows, one
 * probe per key however many rows it holds. A parked key of 200,000 rows, and a key held back of 200,000 more, cost
 * what a key of one row costs.
 */
class OutboxHeadsTests {

    private static final TestDatabase database = TestPostgres.newDatabase("outboxheads");

    private static final JdbcTemplate jdbc =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private static final String ROWS = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
            SELECT gen_random_uuid(), 'events', ?, 'test.thing.noticed.v1', '{}' FROM generate_series(1, ?)""";

    @BeforeAll
    static void outbox() {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(jdbc.getDataSource());
        jdbc.update(ROWS, "parked", 200_000);
        jdbc.update(ROWS, "held-back", 200_000);
        for (int key = 0; key < 100; key++) {
            jdbc.update(ROWS, "key-" + key, 2);
        }
        jdbc.update("""
                UPDATE outbox_event SET attempts = 10, parked_at = now()
                WHERE position = (SELECT min(position) FROM outbox_event WHERE aggregateid = 'parked')""");
        jdbc.update("""
                UPDATE outbox_event SET attempts = 1, next_attempt_at = now() + interval '1 hour'
                WHERE position = (SELECT min(position) FROM outbox_event WHERE aggregateid = 'held-back')""");
        jdbc.execute("VACUUM ANALYZE outbox_event");
    }

    @Test
    void eachKeyHasItsHeadAndTheKeysHeldBackAreMarked() {
        List<OutboxStatements.Head> heads =
                PostgresOutbox.INSTANCE.heads(jdbc, null, OutboxRelay.MAX_KEYS).heads();

        assertThat(heads).hasSize(102);
        assertThat(heads)
                .filteredOn(OutboxStatements.Head::held)
                .extracting(OutboxStatements.Head::key)
                .containsExactlyInAnyOrder("parked", "held-back");
    }

    @Test
    void aKeyHeldBackCostsTheReadOfTheHeadsOneProbeHoweverManyRowsItHolds() {
        JsonNode plan = JsonMapper.builder()
                .build()
                .readTree(jdbc.queryForObject(
                        "EXPLAIN (ANALYZE, FORMAT JSON) " + PostgresOutbox.HEADS,
                        String.class,
                        "",
                        "",
                        OutboxRelay.MAX_KEYS));

        assertThat(rowsRead(plan.get(0).get("Plan")))
                .as("the rows each step of the plan read (its rows times its loops, and those its filter removed)")
                .allSatisfy(rows -> assertThat(rows).isLessThan(1_000));
    }

    @Test
    void beyondTheMostKeysARunReadsTheNextReadGoesOnFromTheLastKeyItRead() {
        OutboxStatements.Heads first = PostgresOutbox.INSTANCE.heads(jdbc, null, 60);
        OutboxStatements.Heads second = PostgresOutbox.INSTANCE.heads(jdbc, first.next(), 60);

        assertThat(first.heads()).hasSize(60);
        assertThat(first.next()).isNotNull();
        assertThat(second.heads()).hasSize(42);
        assertThat(second.next()).as("the second read reached the last key").isNull();
        assertThat(second.heads())
                .extracting(OutboxStatements.Head::key)
                .doesNotContainAnyElementsOf(
                        first.heads().stream().map(OutboxStatements.Head::key).toList());
    }

    @Test
    void theRowsOfAKeyWhoseHeadIsHeldBackAreNotReadToPublish() {
        List<OutboxStatements.Head> heads =
                PostgresOutbox.INSTANCE.heads(jdbc, null, OutboxRelay.MAX_KEYS).heads();

        // As a run that read the heads before another relay parked one would ask for the rows of both keys.
        List<OutboxStatements.Head> asked = heads.stream()
                .filter(head -> head.key().equals("parked") || head.key().equals("key-7"))
                .toList();
        assertThat(PostgresOutbox.INSTANCE.pending(jdbc, asked, 10))
                .extracting(OutboxSender.Row::key)
                .containsOnly("key-7");
    }

    private static List<Long> rowsRead(JsonNode node) {
        List<Long> rows = new ArrayList<>();
        rows.add(node.get("Actual Rows").asLong() * node.get("Actual Loops").asLong()
                + (node.has("Rows Removed by Filter")
                        ? node.get("Rows Removed by Filter").asLong()
                        : 0));
        if (node.has("Plans")) {
            node.get("Plans").forEach(child -> rows.addAll(rowsRead(child)));
        }
        return rows;
    }
}
