package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

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

    private List<String> keys() {
        return this.jdbc.queryForList("SELECT aggregateid FROM outbox_event", String.class);
    }
}
