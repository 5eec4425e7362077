package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The purge of the outbox on PostgreSQL: with the relay, rows published longer ago than the retention go and
 * unpublished rows stay, however old; without it (Debezium publishes the rows, nothing marks them), rows written
 * longer ago go.
 */
class OutboxPurgeTests {

    private static final TestDatabase database = TestPostgres.newDatabase("outboxpurge");

    private static final DriverManagerDataSource dataSource =
            new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());

    private static final String ROW = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at, published_at)
            VALUES (gen_random_uuid(), 'events', ?, 'test.thing.noticed.v1', '{}',
                    now() - make_interval(days => ?), now() - make_interval(days => ?))""";

    private static final String UNPUBLISHED_ROW = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at)
            VALUES (gen_random_uuid(), 'events', ?, 'test.thing.noticed.v1', '{}', now() - make_interval(days => ?))""";

    private final JdbcTemplate jdbc = new JdbcTemplate(dataSource);

    @BeforeEach
    void rows() {
        if (!Boolean.TRUE.equals(
                this.jdbc.queryForObject("SELECT to_regclass('outbox_event') IS NOT NULL", Boolean.class))) {
            new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                    .execute(dataSource);
        }
        this.jdbc.execute("TRUNCATE outbox_event");
        this.jdbc.update(ROW, "written and published long ago", 10, 9);
        this.jdbc.update(ROW, "written long ago, published lately", 10, 1);
        this.jdbc.update(ROW, "written and published lately", 1, 1);
        this.jdbc.update(UNPUBLISHED_ROW, "written long ago, never published", 10);
    }

    @Test
    void withTheRelayRowsPublishedBeforeTheRetentionGoAndUnpublishedRowsStay() {
        long deleted = new OutboxPurge(dataSource, Duration.ofDays(7), 1, true).purge();

        assertThat(deleted).isEqualTo(1);
        assertThat(keys())
                .containsExactlyInAnyOrder(
                        "written long ago, published lately",
                        "written and published lately",
                        "written long ago, never published");
    }

    @Test
    void withoutTheRelayRowsWrittenBeforeTheRetentionGo() {
        long deleted = new OutboxPurge(dataSource, Duration.ofDays(7), 1, false).purge();

        assertThat(deleted).isEqualTo(3);
        assertThat(keys()).containsExactly("written and published lately");
    }

    @Test
    void aRowRepublishedWhileThePurgeWaitsForItIsNotDeleted() throws Exception {
        this.jdbc.execute("TRUNCATE outbox_event");
        this.jdbc.update(ROW, "republished", 10, 9);
        Outbox outbox = new Outbox(dataSource, new EnvelopeCodec(), "events", () -> {}, IdempotencyMetrics.NONE);
        TransactionTemplate transactions = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
        CountDownLatch republished = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);

        CompletableFuture<Integer> republishing = CompletableFuture.supplyAsync(() -> transactions.execute(status -> {
            int rows = outbox.republish(Instant.now().minus(Duration.ofDays(11)), Instant.now());
            republished.countDown();
            await(commit);
            return rows;
        }));
        assertThat(republished.await(10, TimeUnit.SECONDS)).isTrue();
        CompletableFuture<Long> purging =
                CompletableFuture.supplyAsync(() -> new OutboxPurge(dataSource, Duration.ofDays(7), 10, true).purge());
        Awaitility.await()
                .atMost(Duration.ofSeconds(10))
                .alias("the purge waits for the row the republication updated")
                .until(() -> this.jdbc.queryForObject(
                                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                        + " AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM outbox_event%'",
                                Integer.class)
                        == 1);
        commit.countDown();

        assertThat(republishing.get(10, TimeUnit.SECONDS)).isEqualTo(1);
        assertThat(purging.get(10, TimeUnit.SECONDS)).isZero();
        assertThat(this.jdbc.queryForList(
                        "SELECT aggregateid FROM outbox_event WHERE published_at IS NULL", String.class))
                .as("the republished row, to be published again")
                .containsExactly("republished");
    }

    @Test
    void theKeysFirstWrittenBeforeTheRetentionGoExceptOneAWriterHoldsWhichThePurgeDoesNotWaitFor() throws Exception {
        this.jdbc.execute("TRUNCATE outbox_key");
        this.jdbc.update("""
                INSERT INTO outbox_key (aggregatetype, aggregateid, created_at)
                VALUES ('events', 'old', now() - interval '10 days'), ('events', 'held', now() - interval '10 days'),
                       ('events', 'new', now())""");
        TransactionTemplate transactions = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
        CountDownLatch locked = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> transactions.executeWithoutResult(status -> {
            this.jdbc.queryForList(
                    "SELECT aggregateid FROM outbox_key WHERE aggregateid = 'held' FOR UPDATE", String.class);
            locked.countDown();
            await(release);
        }));
        try {
            assertThat(locked.await(10, TimeUnit.SECONDS)).isTrue();

            CompletableFuture<Long> purging = CompletableFuture.supplyAsync(
                    () -> new OutboxPurge(dataSource, Duration.ofDays(7), 1, true).purge());

            assertThat(purging).as("the purge, beside a writer holding a key").succeedsWithin(Duration.ofSeconds(10));
            assertThat(this.jdbc.queryForList("SELECT aggregateid FROM outbox_key", String.class))
                    .containsExactlyInAnyOrder("held", "new");
        } finally {
            release.countDown();
            writer.get(10, TimeUnit.SECONDS);
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            if (!latch.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not released");
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }

    private List<String> keys() {
        return this.jdbc.queryForList("SELECT aggregateid FROM outbox_event", String.class);
    }
}
