package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
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
 * A commit whose outcome the service never learns: the connection is cut while PostgreSQL runs the {@code COMMIT}
 * (a deferred trigger holds it for two seconds), so the server commits the claim and the effect and the service sees
 * its connection fail. The attempt counts as failed (an outage); the message is delivered again, and its claim, found
 * committed, makes it a duplicate: one effect.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=2s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through.
@DirtiesContext
class CommitOutcomeUnknownTests {

    private static final BigDecimal SLOW_TO_COMMIT = new BigDecimal("7.007");

    private static final TestDatabase database = TestPostgres.newDatabase("commitunknown");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aCommitWhoseAnswerIsLostIsFoundCommittedAndItsRedeliveryIsADuplicate() throws Exception {
        this.jdbcTemplate.execute("""
                CREATE OR REPLACE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_sleep(2);
                    RETURN NULL;
                END $$""");
        this.jdbcTemplate.execute("""
                CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON thing_effect
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.amount = 7.007)
                EXECUTE FUNCTION slow_commit()""");
        EventEnvelope<ThingHappened> event = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), SLOW_TO_COMMIT));
        try {
            CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(10))
                    .alias("the service's COMMIT running on the server")
                    .until(() -> this.jdbcTemplate.queryForObject(
                                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'COMMIT'"
                                            + " AND wait_event = 'PgSleep' AND datname = current_database()",
                                    Integer.class)
                            == 1);
            postgres.cut();
            await().atMost(Duration.ofSeconds(10))
                    .alias("the commit done on the server, its answer lost")
                    .until(() -> effects(event) == 1);
            postgres.restore();

            delivery.get(60, TimeUnit.SECONDS);
        } finally {
            postgres.restore();
            this.jdbcTemplate.execute("DROP TRIGGER slow_commit ON thing_effect");
        }

        assertThat(this.recorder.attempts(event.eventId()))
                .as("the attempt whose commit's answer was lost, failed; then the redelivery")
                .hasSizeGreaterThanOrEqualTo(2)
                .first()
                .satisfies(attempt -> assertThat(attempt.failure()).isNotNull());
        assertThat(this.recorder.attempts(event.eventId()))
                .last()
                .satisfies(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(effects(event)).as("one effect").isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("recordThing"))
                .as("the function ran once: the redelivery was found a duplicate")
                .isEqualTo(1);
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
