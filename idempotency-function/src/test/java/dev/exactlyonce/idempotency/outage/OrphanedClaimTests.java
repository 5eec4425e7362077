package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
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
 * A claim orphaned by the network: the event is claimed, then the path between the service and PostgreSQL forgets the
 * connection (a firewall's failover), so the function's statement gets no answer and the service gives the connection
 * up after {@code socket-timeout} (2 s), but its close never reaches the server either. The server's transaction stays
 * idle, holding the claim, for as long as TCP's keepalive lets it (hours), and every redelivery's claim waits on it.
 * Bounded on the server as well, the orphaned transaction ends once idle twice {@code socket-timeout}, and the event is
 * applied once, nothing dead-lettered, while the forgotten connection is still open.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=30s",
            "idempotency.outage.socket-timeout=2s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through.
@DirtiesContext
class OrphanedClaimTests {

    private static final String FUNCTION = "recordThing";

    private static final TestDatabase database = TestPostgres.newDatabase("orphanedclaim");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void aClaimWhoseClientIsGoneWithoutAWordIsReleasedAndTheEventAppliedOnce() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
        pause.awaitReached();
        postgres.silenceOpenConnections();
        pause.release();

        delivery.get(30, TimeUnit.SECONDS);

        assertThat(effects(event)).as("applied once").isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
