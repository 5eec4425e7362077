package dev.exactlyonce.idempotency.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The purge: ids older than the retention (30 days) go, in batches of 500 here; ids inside it stay and still catch
 * copies; a run that finds another instance purging does nothing. The schedule runs a first purge at start-up.
 */
@SpringBootTest(properties = {"idempotency.purge.batch-size=500", "idempotency.purge.initial-delay=10ms"})
@EnableIdempotencyTestKit
class ProcessedEventPurgeTests {

    private static final TestDatabase database = TestPostgres.newDatabase("purge");

    private static final String OLD_ROWS = """
            INSERT INTO processed_event (event_id, processed_at)
            SELECT gen_random_uuid(), now() - interval '40 days' - make_interval(secs => n) FROM generate_series(1, ?) n""";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @TestConfiguration
    static class Meters {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Autowired
    ProcessedEventPurge purge;

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    MeterRegistry meterRegistry;

    @BeforeEach
    void awaitTheScheduledRunAndStartClean() {
        await().atMost(Duration.ofSeconds(10))
                .until(() -> this.meterRegistry
                                .find(MicrometerIdempotencyMetrics.PURGE_RUNS)
                                .timer()
                        != null);
        this.jdbcTemplate.update("DELETE FROM processed_event");
        this.probe.reset();
    }

    @Test
    void idsOlderThanTheRetentionAreDeletedInBatches() {
        this.jdbcTemplate.update(OLD_ROWS, 2_345);
        double purgedBefore = purged();

        ProcessedEventPurge.Result result = this.purge.purge();

        assertThat(result.ran()).isTrue();
        assertThat(result.rows()).isEqualTo(2_345);
        assertThat(result.batches()).as("500, 500, 500, 500 and 345").isEqualTo(5);
        assertThat(count()).isZero();
        assertThat(purged() - purgedBefore).as("counted, once each").isEqualTo(2_345);
    }

    /** After a purge, the gauges say how old the oldest id kept is, beside the retention: what the alert compares. */
    @Test
    void thePurgeReportsTheOldestIdKeptAgainstTheRetention() {
        this.jdbcTemplate.update(OLD_ROWS, 10);
        this.jdbcTemplate.update(
                "INSERT INTO processed_event (event_id, processed_at) VALUES (gen_random_uuid(), now() - interval"
                        + " '29 days')");

        this.purge.purge();

        assertThat(gauge(MicrometerIdempotencyMetrics.PROCESSED_OLDEST_AGE))
                .isBetween((double) Duration.ofDays(29).toSeconds(), (double)
                        Duration.ofDays(29).plusMinutes(1).toSeconds());
        assertThat(gauge(MicrometerIdempotencyMetrics.PROCESSED_RETENTION))
                .isEqualTo((double) Duration.ofDays(30).toSeconds());
    }

    private double gauge(String name) {
        return this.meterRegistry.get(name).gauge().value();
    }

    /** The purge counter, shared by the tests of the context. */
    private double purged() {
        Counter counter =
                this.meterRegistry.find(MicrometerIdempotencyMetrics.PURGED).counter();
        return counter != null ? counter.count() : 0;
    }

    @Test
    void idsInsideTheRetentionSurviveAndACopyOfTheirEventIsStillDiscarded() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.deliveries.deliver(event);
        this.jdbcTemplate.update(
                "INSERT INTO processed_event (event_id, processed_at) VALUES (gen_random_uuid(), now() - interval"
                        + " '29 days')");
        this.jdbcTemplate.update(OLD_ROWS, 10);

        ProcessedEventPurge.Result result = this.purge.purge();

        assertThat(result.rows()).isEqualTo(10);
        assertThat(count()).isEqualTo(2);
        this.deliveries.deliver(event);
        assertThat(this.probe.invocations("recordThing")).isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
    }

    /** Two claims of one id under two names (one forged): the older one's purge leaves the recent one. */
    @Test
    void theExpiredClaimOfAnIdLeavesTheRecentClaimOfThatIdUnderAnotherName() {
        EventEnvelope<ThingHappened> genuine = Things.thingHappened();
        this.jdbcTemplate.update(
                "INSERT INTO processed_event (event_id, event_name, processed_at)"
                        + " VALUES (?, 'test.neighbour.noticed.v1', now() - interval '31 days')",
                genuine.eventId());
        this.deliveries.deliver(genuine);

        ProcessedEventPurge.Result result = this.purge.purge();

        assertThat(result.rows()).isEqualTo(1);
        assertThat(this.processedEvents.rows(genuine.eventId()))
                .as("the genuine event's claim, kept")
                .isEqualTo(1);
        this.deliveries.deliver(genuine);
        assertThat(this.probe.invocations("recordThing"))
                .as("its copy still discarded")
                .isEqualTo(1);
    }

    @Test
    void aRunThatFindsAnotherInstancePurgingDoesNothing() throws Exception {
        this.jdbcTemplate.update(OLD_ROWS, 100);
        try (Connection otherInstance =
                        DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password());
                Statement statement = otherInstance.createStatement()) {
            statement.execute(
                    "SELECT pg_advisory_lock(hashtext('dev.exactlyonce.idempotency'), hashtext('processed_event'))");

            ProcessedEventPurge.Result skipped = this.purge.purge();

            assertThat(skipped.ran()).isFalse();
            assertThat(count()).isEqualTo(100);
            // Released before the connection closes: the server ends a closed session's locks a moment later.
            statement.execute(
                    "SELECT pg_advisory_unlock(hashtext('dev.exactlyonce.idempotency'), hashtext('processed_event'))");
        }

        assertThat(this.purge.purge().rows())
                .as("once the other instance is done")
                .isEqualTo(100);
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.PURGE_RUNS)
                        .tag("outcome", "skipped")
                        .timer()
                        .count())
                .isEqualTo(1);
    }

    private int count() {
        Integer count = this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class);
        return count != null ? count : 0;
    }
}
