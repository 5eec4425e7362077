package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The other ways a database stops working, made for real on PostgreSQL while messages arrive: the service's role is
 * locked out, the database turns read-only (as after a failover to a replica), the disk is full (the error PostgreSQL
 * raises, 53100, from a trigger on the table the guard writes), the guard's insert is no longer granted. Each is the database's condition, not the message's:
 * consumption halts once, without flapping, nothing is dead-lettered, and each event is applied once when the
 * database works again. The binding allows two attempts; a connection is waited for 1 s.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=30s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
class DatabaseConditionsTests {

    private static final TestDatabase database = TestPostgres.newDatabase("conditions");

    /** The service's own role, owner of its database, which the tests lock out. */
    private static final String ROLE = database.name() + "_owner";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.server()
                .execute(
                        "CREATE ROLE \"%s\" LOGIN PASSWORD 'conditions'".formatted(ROLE),
                        "ALTER DATABASE \"%s\" OWNER TO \"%s\"".formatted(database.name(), ROLE));
        registry.add("spring.datasource.url", database::jdbcUrl);
        registry.add("spring.datasource.username", () -> ROLE);
        registry.add("spring.datasource.password", () -> "conditions");
    }

    @TestConfiguration
    static class Meters {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    MeterRegistry meterRegistry;

    @Autowired
    HikariDataSource pool;

    /** As the server's superuser, straight to the service's database. */
    private final JdbcTemplate superuser = new JdbcTemplate(new DriverManagerDataSource(
            database.jdbcUrl(),
            TestPostgres.server().username(),
            TestPostgres.server().password()));

    @AfterEach
    void heal() {
        TestPostgres.server()
                .execute(
                        "ALTER ROLE \"%s\" LOGIN".formatted(ROLE),
                        "ALTER DATABASE \"%s\" RESET default_transaction_read_only".formatted(database.name()));
        this.superuser.execute("DROP TRIGGER IF EXISTS disk_full ON processed_event");
        this.superuser.execute("GRANT INSERT ON processed_event TO \"%s\"".formatted(ROLE));
        await().atMost(Duration.ofSeconds(30)).until(() -> this.outage.halt() == null);
        this.recorder.reset();
        this.deliveries.resetLastError();
    }

    @AfterAll
    static void dropRole() {
        TestPostgres.server()
                .execute(
                        "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)".formatted(database.name()),
                        "DROP ROLE IF EXISTS \"%s\"".formatted(ROLE));
    }

    @Test
    void aRoleLockedOutHaltsConsumptionAndNothingIsDeadLettered() throws Exception {
        assertHeldWhileAndAppliedOnceAfter(
                () -> {
                    TestPostgres.server()
                            .execute(
                                    "ALTER ROLE \"%s\" NOLOGIN".formatted(ROLE),
                                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'"
                                            .formatted(ROLE));
                    // The pool replaces its connections (as it does at their maximum lifetime): each new one is
                    // refused, and no transaction can begin.
                    this.pool.getHikariPoolMXBean().softEvictConnections();
                },
                () -> TestPostgres.server().execute("ALTER ROLE \"%s\" LOGIN".formatted(ROLE)));
    }

    @Test
    void aDatabaseTurnedReadOnlyHaltsConsumptionOnceWithoutResumingUntilItIsWritable() throws Exception {
        assertHeldWhileAndAppliedOnceAfter(
                () -> TestPostgres.server()
                        .execute(
                                "ALTER DATABASE \"%s\" SET default_transaction_read_only = on"
                                        .formatted(database.name()),
                                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'"
                                        .formatted(ROLE)),
                () -> TestPostgres.server()
                        .execute("ALTER DATABASE \"%s\" RESET default_transaction_read_only"
                                .formatted(database.name())));
    }

    @Test
    void aFullDiskHaltsConsumptionAndNothingIsDeadLettered() throws Exception {
        assertHeldWhileAndAppliedOnceAfter(
                () -> this.superuser.execute("""
                        CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN
                            RAISE EXCEPTION 'could not extend file "base/16384/16385": No space left on device'
                                USING ERRCODE = 'disk_full';
                        END $$;
                        CREATE TRIGGER disk_full BEFORE INSERT ON processed_event
                            FOR EACH ROW EXECUTE FUNCTION disk_full()"""),
                () -> this.superuser.execute("DROP TRIGGER disk_full ON processed_event"));
    }

    /**
     * The service's role may no longer insert into {@code processed_event} (a migration or an administrator took the
     * privilege away): the claim fails with 42501. The claim is the library's own statement, the same for every message
     * but its id: the database's condition, never the message's.
     */
    @Test
    void anInsertOnProcessedEventRevokedHaltsConsumptionAndNothingIsDeadLettered() throws Exception {
        assertHeldWhileAndAppliedOnceAfter(
                () -> this.superuser.execute("REVOKE INSERT ON processed_event FROM \"%s\"".formatted(ROLE)),
                () -> this.superuser.execute("GRANT INSERT ON processed_event TO \"%s\"".formatted(ROLE)));
    }

    /**
     * A halt that began with one failure goes on for another: the role was locked out, then let in again while the
     * database turned read-only (a failover that also rotated what was wrong). Health's cause follows the failure the
     * probe meets now, not the first one (the log says it at INFO once a minute).
     */
    @Test
    void theHaltsCauseFollowsTheFailureTheProbeMeetsNow() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        TestPostgres.server()
                .execute(
                        "ALTER ROLE \"%s\" NOLOGIN".formatted(ROLE),
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'".formatted(ROLE));
        this.pool.getHikariPoolMXBean().softEvictConnections();
        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        assertThat(this.outage.halt().cause()).contains("not permitted to log in");

        TestPostgres.server()
                .execute(
                        "ALTER DATABASE \"%s\" SET default_transaction_read_only = on".formatted(database.name()),
                        "ALTER ROLE \"%s\" LOGIN".formatted(ROLE));
        await().atMost(Duration.ofSeconds(10))
                .alias("health's cause: the read-only database the probe meets now")
                .until(() -> String.valueOf(this.outage.halt()).contains("read-only"));

        TestPostgres.server()
                .execute("ALTER DATABASE \"%s\" RESET default_transaction_read_only".formatted(database.name()));
        delivery.get(10, TimeUnit.SECONDS);
        assertThat(effects(event)).isEqualTo(1);
    }

    /**
     * Every connection of the pool is busy (the service's other work holds them): the message's transaction cannot
     * begin within the pool's timeout, an outage, and consumption halts. The connections the pool has still work, and
     * go on working once they come back: the halt and the probe's failed checks close none of them, as they would if
     * the failure had broken them (a server restarted, a primary demoted). Closing them all on every failure to get
     * one turns a busy pool, or a server at its connection limit (53300), into an empty one.
     */
    @Test
    void aPoolWithNoConnectionFreeHaltsConsumptionAndKeepsTheConnectionsThatWork() throws Exception {
        int size = this.pool.getMaximumPoolSize();
        await().atMost(Duration.ofSeconds(10))
                .until(() -> this.pool.getHikariPoolMXBean().getTotalConnections() == size);
        List<Integer> before = backends();
        List<Connection> busy = new ArrayList<>();
        assertHeldWhileAndAppliedOnceAfter(
                () -> {
                    for (int i = 0; i < size; i++) {
                        try {
                            busy.add(this.pool.getConnection());
                        } catch (SQLException ex) {
                            throw new IllegalStateException(ex);
                        }
                    }
                },
                () -> busy.forEach(connection -> {
                    try {
                        connection.close();
                    } catch (SQLException ex) {
                        throw new IllegalStateException(ex);
                    }
                }));
        assertThat(backends())
                .as("the server sessions of the pool before the halt, all still open after it")
                .containsAll(before);
    }

    private List<Integer> backends() {
        return this.superuser.queryForList(
                "SELECT pid FROM pg_stat_activity WHERE usename = ? ORDER BY pid", Integer.class, ROLE);
    }

    /**
     * Makes the fault, delivers an event (again whenever it is given back, as a broker would), checks it is held
     * without a second halt and without being dead-lettered for longer than its two attempts would last, mends the
     * fault, and checks the event is applied once within 10 s.
     */
    private void assertHeldWhileAndAppliedOnceAfter(Runnable fault, Runnable mend) throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        double halts = count(MicrometerIdempotencyMetrics.HALTS);
        fault.run();
        AtomicBoolean committed = new AtomicBoolean();
        this.recorder.afterCommit(event.eventId(), () -> committed.set(true));

        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        await().during(Duration.ofSeconds(3))
                .atMost(Duration.ofSeconds(4))
                .until(() -> this.outage.halt() != null && this.deliveries.lastError() == null);
        assertThat(delivery).as("held while the fault lasts").isNotDone();
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.HALTED_NOW)
                        .gauge()
                        .value())
                .as("how long consumption has been halted, on a dashboard")
                .isGreaterThan(2.0);
        mend.run();

        delivery.get(10, TimeUnit.SECONDS);
        await().atMost(Duration.ofSeconds(5)).until(() -> this.outage.halt() == null);
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.HALTED_NOW)
                        .gauge()
                        .value())
                .isZero();
        assertThat(effects(event)).as("applied once").isEqualTo(1);
        assertThat(this.recorder.attempts(event.eventId()))
                .as("one attempt: the one that met the fault (beginning its transaction, or at its claim) held in"
                        + " place, none of the message's attempts used")
                .hasSize(1);
        assertThat(committed)
                .as("the test kit's action after the commit ran, in the transaction begun again")
                .isTrue();
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
        assertThat(count(MicrometerIdempotencyMetrics.HALTS) - halts)
                .as("one halt, not one per probe that found a connection")
                .isEqualTo(1);
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.superuser.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }

    private double count(String name) {
        Counter counter = this.meterRegistry.find(name).counter();
        return counter != null ? counter.count() : 0;
    }
}
