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
import dev.exactlyonce.idempotency.test.TestMariaDb;
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
 * The network to MariaDB goes silent (a proxy between them forgets every open connection, as a firewall's failover
 * does) while the pool's connections were in use a moment ago, so the pool hands one out without checking it. MariaDB's
 * driver sends the start of a transaction ({@code set autocommit=0}) as the transaction begins: without a bound on the
 * connection's network wait before it, the consumer thread would wait for TCP's timeout (about 15 minutes), and no halt
 * would be reported. Bounded by {@code socket-timeout} (2 s), the begin fails, consumption halts, and the message is
 * applied once through a new connection.
 */
@SpringBootTest(
        properties = {
            "spring.flyway.locations=classpath:db/migration-mariadb",
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
class SilencedNetworkOnMariaDbTests {

    /** HikariCP checks a connection it hands out only when it was idle longer than this; read as the pool starts. */
    private static final String ALIVE_BYPASS_WINDOW = "com.zaxxer.hikari.aliveBypassWindowMs";

    private static final TestDatabase database = TestMariaDb.newDatabase("silenced");

    private static final TcpProxy mariaDb =
            TcpProxy.to(TestMariaDb.server().host(), TestMariaDb.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        // As if every connection had been in use a moment ago: handed out unchecked. Cleared once the pool started.
        System.setProperty(ALIVE_BYPASS_WINDOW, "600000");
        database.registerDataSource(registry, mariaDb);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    ConsumptionHalt outage;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterAll
    static void close() {
        System.clearProperty(ALIVE_BYPASS_WINDOW);
        mariaDb.close();
    }

    @Test
    void aTransactionBegunOnASilencedConnectionHaltsConsumptionAndTheMessageIsAppliedOnce() throws Exception {
        System.clearProperty(ALIVE_BYPASS_WINDOW);
        this.deliveries.deliver(Things.thingHappened());
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        mariaDb.silenceOpenConnections();

        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(90));
        await().alias("halted: the begin's wait bounded by socket-timeout")
                .atMost(Duration.ofSeconds(10))
                .until(() -> this.outage.halt() != null);

        delivery.get(60, TimeUnit.SECONDS);
        assertThat(effects(event)).as("applied once").isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId().toString());
        return count != null ? count : 0;
    }
}
