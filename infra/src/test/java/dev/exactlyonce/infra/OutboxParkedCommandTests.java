package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * {@code outbox-parked} on a real PostgreSQL: lists the events a relay parked in a service's outbox, with what holds
 * each, and releases or skips them; what is not parked is said, and changes nothing.
 */
class OutboxParkedCommandTests {

    private static final TestDatabase database = TestPostgres.newDatabase("outboxparked");

    private static final DriverManagerDataSource dataSource =
            new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());

    private static final String ROW = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, attempts, last_error, parked_at)
            VALUES (?, 'events', ?, 'stock.stock.reserved.v1', '{}', ?, ?, ?::timestamptz)""";

    private final JdbcTemplate jdbc = new JdbcTemplate(dataSource);

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    private final Map<String, String> env = Map.of(
            "SPRING_DATASOURCE_URL", database.jdbcUrl(),
            "SPRING_DATASOURCE_USERNAME", database.username(),
            "SPRING_DATASOURCE_PASSWORD", database.password());

    private final UUID released = UUID.randomUUID();

    private final UUID skipped = UUID.randomUUID();

    @BeforeEach
    void parkedRows() {
        if (!Boolean.TRUE.equals(
                this.jdbc.queryForObject("SELECT to_regclass('outbox_event') IS NOT NULL", Boolean.class))) {
            new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                    .execute(dataSource);
        }
        this.jdbc.execute("TRUNCATE outbox_event");
        this.jdbc.update(ROW, this.released, "order-1", 10, "the broker refused (nack)\nline two", "now()");
        this.jdbc.update(ROW, UUID.randomUUID(), "order-1", 0, null, null);
        this.jdbc.update(ROW, this.skipped, "order-2", 10, "NOT_FOUND - no exchange", "now()");
    }

    @Test
    void itListsTheParkedEventsWithWhatTheyHoldBack() {
        int status = run("outbox-parked");

        assertThat(status).isZero();
        assertThat(this.out.toString())
                .contains("2 parked outbox event(s)")
                .contains(this.released + "  events  stock.stock.reserved.v1 key order-1: refused 10 time(s)")
                .contains("1 later event(s) of its key waiting")
                .contains("the broker refused (nack)\\u000aline two");
    }

    @Test
    void itReleasesAndSkipsParkedEventsAndSaysWhichWereNot() {
        int status = run("outbox-parked", "release", this.released.toString(), this.skipped.toString());
        assertThat(status)
                .as("one of them was no longer parked the second time")
                .isZero();

        assertThat(run("outbox-parked", "skip", this.skipped.toString(), this.released.toString()))
                .isEqualTo(1);
        assertThat(this.out.toString())
                .contains("released " + this.released)
                .contains("released " + this.skipped)
                .contains(this.released + " is not parked");
        assertThat(this.jdbc.queryForList(
                        "SELECT aggregateid FROM outbox_event WHERE parked_at IS NOT NULL", String.class))
                .isEmpty();
    }

    @Test
    void skipAllSkipsEveryParkedEventAndTheirKeysGoOn() {
        assertThat(run("outbox-parked", "skip", "--all")).isZero();

        assertThat(this.jdbc.queryForList(
                        "SELECT id FROM outbox_event WHERE published_at IS NOT NULL AND parked_at IS NOT NULL",
                        UUID.class))
                .containsExactlyInAnyOrder(this.released, this.skipped);
        assertThat(run("outbox-parked")).isZero();
        assertThat(this.out.toString()).contains("No parked outbox events.");
    }

    @Test
    void releaseAllReleasesEveryParkedEventHoweverManyAndSaysHowMany() {
        this.jdbc.update("""
                INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, attempts, last_error, parked_at)
                SELECT gen_random_uuid(), 'events', 'order-many-' || n, 'stock.stock.reserved.v1', '{}', 10, 'nack', now()
                FROM generate_series(1, 1500) AS n""");

        assertThat(run("outbox-parked", "release", "--all")).isZero();

        assertThat(this.jdbc.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE parked_at IS NOT NULL", Integer.class))
                .isZero();
        assertThat(this.out.toString()).contains("released 1502 parked event(s); none is parked now");
    }

    @Test
    void withoutTheServicesDatabaseItSaysWhatToSet() {
        int status = Infra.run(
                new String[] {"outbox-parked"},
                Map.of(),
                new PrintStream(this.out, true),
                new PrintStream(this.err, true));

        assertThat(status).isEqualTo(2);
        assertThat(this.err.toString()).contains("SPRING_DATASOURCE_URL");
    }

    private int run(String... args) {
        return Infra.run(args, this.env, new PrintStream(this.out, true), new PrintStream(this.err, true));
    }
}
