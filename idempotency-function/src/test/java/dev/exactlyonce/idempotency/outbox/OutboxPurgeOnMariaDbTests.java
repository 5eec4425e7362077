package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.TableName;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
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
 * The purge of the outbox, and its parked rows, on MariaDB: with the relay, rows published longer ago than the
 * retention go and unpublished rows stay; without it, rows written longer ago go; a row republished while the purge
 * waits for it stays; a parked row is listed with the rows it holds back, released or skipped.
 */
class OutboxPurgeOnMariaDbTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("outboxpurge");

    private static final DriverManagerDataSource dataSource =
            new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());

    private static final String ROW = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at, published_at)
            VALUES (UUID(), 'events', ?, 'test.thing.noticed.v1', '{}',
                    NOW(6) - INTERVAL ? DAY, NOW(6) - INTERVAL ? DAY)""";

    private static final String UNPUBLISHED_ROW = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at)
            VALUES (UUID(), 'events', ?, 'test.thing.noticed.v1', '{}', NOW(6) - INTERVAL ? DAY)""";

    private final JdbcTemplate jdbc = new JdbcTemplate(dataSource);

    @BeforeEach
    void rows() {
        if (!TableName.exists(this.jdbc, "outbox_event")) {
            new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-mariadb.sql"))
                    .execute(dataSource);
        }
        this.jdbc.execute("DELETE FROM outbox_event");
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
        this.jdbc.execute("DELETE FROM outbox_event");
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
                                "SELECT count(*) FROM information_schema.innodb_trx t"
                                        + " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
                                        + " WHERE p.db = DATABASE() AND t.trx_state = 'LOCK WAIT'"
                                        + " AND t.trx_query LIKE 'DELETE FROM outbox_event%'",
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
    void aParkedRowIsListedWithWhatItHoldsBackAndReleasedOrSkipped() {
        this.jdbc.execute("DELETE FROM outbox_event");
        this.jdbc.update(UNPUBLISHED_ROW, "parked-key", 2);
        this.jdbc.update(UNPUBLISHED_ROW, "parked-key", 1);
        this.jdbc.update("UPDATE outbox_event SET attempts = 10, last_error = 'refused', parked_at = NOW(6)"
                + " WHERE aggregateid = 'parked-key' ORDER BY position LIMIT 1");
        ParkedOutboxEvents parked = new ParkedOutboxEvents(dataSource);

        List<ParkedOutboxEvents.Parked> listed = parked.list(10);

        assertThat(listed).singleElement().satisfies(row -> {
            assertThat(row.key()).isEqualTo("parked-key");
            assertThat(row.attempts()).isEqualTo(10);
            assertThat(row.heldBack()).as("the key's later row").isEqualTo(1);
        });
        assertThat(new OutboxBacklogQuery(dataSource).read()).satisfies(backlog -> {
            assertThat(backlog.unpublished()).isEqualTo(2);
            assertThat(backlog.parked()).isEqualTo(1);
        });
        assertThat(parked.release(listed.get(0).id())).isTrue();
        assertThat(parked.list(10)).isEmpty();
        this.jdbc.update(
                "UPDATE outbox_event SET attempts = 10, parked_at = NOW(6) WHERE id = ?",
                listed.get(0).id());
        assertThat(parked.skip(listed.get(0).id())).isTrue();
        assertThat(this.jdbc.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class))
                .as("the skipped row marked published, the key's later row still to publish")
                .isEqualTo(1);
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
