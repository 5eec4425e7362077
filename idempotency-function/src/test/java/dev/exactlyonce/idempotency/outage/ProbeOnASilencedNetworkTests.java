package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The outage probe's own write meets a network gone silent: while consumption is halted, the probe's claim waits on a
 * lock another client holds on the table of processed events, and meanwhile the path to PostgreSQL forgets the probe's
 * connection (a firewall's failover). The database answers again for every new connection once the lock is released,
 * but a probe without a bound on its network wait would wait for TCP's timeout (minutes to hours) before its next
 * check, consumption halted all along. Bounded by {@code socket-timeout} (2 s), its check fails, the next one goes
 * through a new connection, and consumption resumes.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=60s",
            "idempotency.outage.socket-timeout=2s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through.
@DirtiesContext
class ProbeOnASilencedNetworkTests {

    private static final TestDatabase database = TestPostgres.newDatabase("silencedprobe");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    ConsumptionHalt outage;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void aProbeWhoseConnectionGoesSilentChecksAgainAndConsumptionResumes() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        postgres.cut();
        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(90));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        try (Connection locker =
                DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password())) {
            locker.setAutoCommit(false);
            try (Statement statement = locker.createStatement()) {
                statement.execute("LOCK TABLE processed_event IN ACCESS EXCLUSIVE MODE");
            }
            postgres.restore();
            await().alias("the probe's claim waiting on the lock")
                    .atMost(Duration.ofSeconds(10))
                    .until(() -> waitingOnALock() > 0);
            postgres.silenceOpenConnections();
            locker.rollback();
        }

        await().alias("consumption resumed, the probe's silenced connection given up")
                .atMost(Duration.ofSeconds(20))
                .until(() -> this.outage.halt() == null);
        delivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(event)).as("applied once").isEqualTo(1);
    }

    /** Sessions of the service's database that wait for a lock. */
    private int waitingOnALock() {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                Integer.class);
        return count != null ? count : 0;
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
