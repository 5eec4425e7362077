package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowCallbackHandler;
import org.springframework.jdbc.core.RowMapper;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * What the relay's runs read on PostgreSQL while a transaction is held open (a report, a replica's
 * {@code hot_standby_feedback}, an idle replication slot): vacuum then removes none of the row versions the runs' marks
 * leave, and a read that walks them costs more with every row published. A run's reads cost what the rows published
 * since the last run cost, not what the hold's whole span published.
 */
class OutboxReadsUnderAHeldTransactionTests {

    private static final int KEYS = 50;

    private static final int ROWS_PER_KEY = 1_200;

    /** The rows of each key a run publishes. */
    private static final int PER_RUN = 100;

    private static final int RUNS = 10;

    private final TestDatabase database = TestPostgres.newDatabase("heldxmin");

    /** The buffers (shared pages hit or read) the statements it ran read, each run first under EXPLAIN. */
    private final AtomicLong buffers = new AtomicLong();

    private final JdbcTemplate jdbc =
            new JdbcTemplate(new DriverManagerDataSource(
                    this.database.jdbcUrl(), this.database.username(), this.database.password())) {

                @Override
                public void query(String sql, RowCallbackHandler handler, Object... args) {
                    count(sql, args);
                    super.query(sql, handler, args);
                }

                @Override
                public <T> List<T> query(String sql, RowMapper<T> mapper, Object... args) {
                    count(sql, args);
                    return super.query(sql, mapper, args);
                }

                private void count(String sql, Object... args) {
                    String plan = queryForObject("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, String.class, args);
                    JsonNode root =
                            JsonMapper.builder().build().readTree(plan).get(0).get("Plan");
                    buffers.addAndGet(root.get("Shared Hit Blocks").asLong()
                            + root.get("Shared Read Blocks").asLong());
                }
            };

    @Test
    void aRunReadsItsKeysHeadsPastTheRowsPublishedBeforeNotThroughThem() throws SQLException {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(this.jdbc.getDataSource());
        this.jdbc.update("""
                INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
                SELECT gen_random_uuid(), 'events', 'key-' || key, 'test.thing.noticed.v1', '{}'
                FROM generate_series(1, ?) AS row, generate_series(1, ?) AS key
                ORDER BY row, key""", ROWS_PER_KEY, KEYS);
        this.jdbc.execute("VACUUM ANALYZE outbox_event");
        PendingKeys keys = new PendingKeys();
        try (Connection held = DriverManager.getConnection(
                this.database.jdbcUrl(), this.database.username(), this.database.password())) {
            held.setAutoCommit(false);
            held.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            held.createStatement().execute("SELECT count(*) FROM outbox_event");

            List<Long> costs = new ArrayList<>();
            for (int run = 0; run <= RUNS; run++) {
                this.buffers.set(0);
                List<OutboxStatements.Head> heads = keys.read(PostgresOutbox.INSTANCE, this.jdbc, OutboxRelay.MAX_KEYS)
                        .heads();
                costs.add(this.buffers.get());
                int before = run;
                assertThat(heads).hasSize(KEYS);
                assertThat(heads)
                        .as("each key's head, run %d", run)
                        .allSatisfy(head -> assertThat(head.position()).isEqualTo(position(head.key(), before)));
                // As the run marks what the broker confirmed: the next PER_RUN rows of every key.
                this.jdbc.update(
                        """
                        UPDATE outbox_event SET published_at = now()
                        FROM unnest(?::text[], ?::bigint[]) AS head (key, position)
                        WHERE outbox_event.aggregateid = head.key AND outbox_event.published_at IS NULL
                          AND outbox_event.position >= head.position AND outbox_event.position < head.position + ?""",
                        heads.stream().map(OutboxStatements.Head::key).toArray(String[]::new),
                        heads.stream().map(OutboxStatements.Head::position).toArray(Long[]::new),
                        (long) PER_RUN * KEYS);
            }
            held.rollback();

            assertThat(costs.get(RUNS))
                    .as(
                            "the buffers the last run's reads took, after %d rows published under the hold, against the"
                                    + " second run's, after %d (each run's, in order: %s)",
                            RUNS * PER_RUN * KEYS, PER_RUN * KEYS, costs)
                    .isLessThan(2 * costs.get(1));
        }
    }

    /** The position of a key's head before a run: the rows were written a row of each key at a time. */
    private static long position(String key, int run) {
        int n = Integer.parseInt(key.substring("key-".length()));
        return (long) run * PER_RUN * KEYS + n;
    }
}
