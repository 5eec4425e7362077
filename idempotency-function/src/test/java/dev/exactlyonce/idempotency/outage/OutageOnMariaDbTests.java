package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The outage halt on MariaDB, with the faults made for real: the server taken away (a proxy between it and the service
 * is cut), and the server made read-only ({@code SET GLOBAL read_only}, what a failover to a replica leaves), which
 * MariaDB reports with its code 1290 and the general SQLSTATE HY000. In both, messages are held, not dead-lettered,
 * and applied once each when the database works again. The service connects as a user of its own database only (a
 * read-only server refuses its writes; an administrator's would go through). The binding allows two attempts.
 */
@SpringBootTest(
        properties = {
            "spring.flyway.locations=classpath:db/migration-mariadb",
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through.
@DirtiesContext
@SharedServers.Alone(SharedServers.Server.MARIADB)
class OutageOnMariaDbTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("outage");

    private static final TestDatabase service = serviceUser(database);

    private static final TcpProxy mariaDb =
            TcpProxy.to(TestMariaDb.server().host(), TestMariaDb.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        service.registerDataSource(registry, mariaDb);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ConsumptionHalt outage;

    /** Straight to the database, as its administrator, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterEach
    void reset() {
        TestMariaDb.server().execute("SET GLOBAL read_only = OFF");
        mariaDb.restore();
        await().atMost(Duration.ofSeconds(30)).until(() -> this.outage.halt() == null);
        this.recorder.reset();
        this.deliveries.resetLastError();
    }

    @AfterAll
    static void close() {
        mariaDb.close();
        TestMariaDb.server().execute("DROP USER IF EXISTS '%s'@'%%'".formatted(service.username()));
    }

    @Test
    void messagesArrivingWhileTheDatabaseIsAwayAreHeldAndAppliedOnceWhenItAnswers() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        mariaDb.cut();

        CompletableFuture<Void> delivery = this.deliveries.deliverAsync(event);
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        // Longer than both attempts of the message would last (two waits of 1 s for a connection).
        await().during(Duration.ofMillis(2500)).atMost(Duration.ofSeconds(3)).until(() -> !delivery.isDone());
        mariaDb.restore();

        delivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    @Test
    void messagesArrivingWhileTheServerIsReadOnlyAreHeldAndAppliedOnceWhenItTakesWritesAgain() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        TestMariaDb.server().execute("SET GLOBAL read_only = ON");

        CompletableFuture<Void> delivery = this.deliveries.deliverAsync(event);
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        await().during(Duration.ofMillis(2000)).atMost(Duration.ofSeconds(3)).until(() -> !delivery.isDone());
        assertThat(this.outage.halt())
                .as("halted by the claim the read-only server refused")
                .satisfies(halt -> assertThat(halt.cause()).contains("read-only"));
        assertThat(this.recorder.attempts(event.eventId()))
                .as("the attempt that met the read-only server is held in place: none ended")
                .isEmpty();
        TestMariaDb.server().execute("SET GLOBAL read_only = OFF");

        delivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.recorder.attempts(event.eventId()))
                .as("one attempt, begun again once the server took writes")
                .singleElement()
                .satisfies(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    /**
     * InnoDB that cannot extend {@code processed_event}'s file (the disk full) reports 1114, "The table is full", with
     * the general SQLSTATE HY000; here from a trigger on the table the guard writes, as MariaDB would raise it. The
     * claim is the library's own statement, the same for every message but its id: the database's condition, never the
     * message's. The message is held, not dead-lettered, and applied once when the table takes rows again.
     */
    @Test
    void aTableFullAtTheClaimHaltsConsumptionAndNothingIsDeadLettered() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.jdbcTemplate.execute("""
                CREATE TRIGGER table_full BEFORE INSERT ON processed_event FOR EACH ROW
                    SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1114, MESSAGE_TEXT = 'The table ''processed_event'' is full'""");
        try {
            CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
            assertThat(this.outage.halt().cause()).contains("is full");
            // Longer than both attempts of the message would last.
            await().during(Duration.ofSeconds(4))
                    .atMost(Duration.ofSeconds(5))
                    .until(() -> !delivery.isDone() && this.deliveries.lastError() == null);
            this.jdbcTemplate.execute("DROP TRIGGER table_full");

            delivery.get(30, TimeUnit.SECONDS);
        } finally {
            this.jdbcTemplate.execute("DROP TRIGGER IF EXISTS table_full");
        }
        assertThat(effects(event)).isEqualTo(1);
        assertThat(this.recorder.attempts(event.eventId()))
                .as("one attempt, held in place at its claim and begun again")
                .singleElement()
                .satisfies(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    /** A user with every privilege on the database and none on the server. */
    private static TestDatabase serviceUser(TestDatabase database) {
        String user = "svc_" + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x10000, 0x100000));
        TestMariaDb.server()
                .execute(
                        "CREATE USER '%s'@'%%' IDENTIFIED BY 'secret'".formatted(user),
                        "GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'".formatted(database.name(), user));
        return new TestDatabase(database.name(), database.jdbcUrl(), user, "secret");
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
