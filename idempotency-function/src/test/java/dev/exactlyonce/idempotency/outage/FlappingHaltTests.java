package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
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
 * A halt that flaps: the business table's disk is full (53100, raised for real by a trigger on it) while
 * {@code processed_event}'s is not, so the probe's write goes through and every message fails. Messages come now and
 * then: each trial the probe opens with no message to try ends in a resume, and the next message halts consumption
 * again. A dashboard watching {@value MicrometerIdempotencyMetrics#HALTED_NOW} must see a service that processes
 * nothing: a halt that begins within a minute of the last resume goes on counting from the first one's start. And
 * each trial whose message met the outage again is counted.
 */
@SpringBootTest(
        properties = {
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=1s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
class FlappingHaltTests {

    private static final TestDatabase database = TestPostgres.newDatabase("flapping");

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
    EventDeliveries deliveries;

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    MeterRegistry meterRegistry;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterEach
    void mend() {
        this.jdbcTemplate.execute("DROP TRIGGER IF EXISTS disk_full ON thing_effect");
        this.deliveries.resetLastError();
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() == null);
    }

    /**
     * A message that never reaches the database (a body that is not an event, rejected before its claim) takes the
     * trial: it says nothing of the database, so the trial stays open for the next message, which meets the outage
     * again: one halt, not a resume and a second halt.
     */
    @Test
    void aMessageRejectedBeforeItsClaimDoesNotEndTheTrial() {
        fillTheBusinessTablesDisk();
        double halts = count(MicrometerIdempotencyMetrics.HALTS);

        // Held for its max-hold, tried at each trial, then given back (and not delivered again here).
        catchThrowable(() -> this.deliveries.deliver(Things.thingHappened()));
        assertThat(this.outage.halt()).isNotNull();
        // Waits for the next trial, and takes it.
        this.deliveries.deliverBody("not an event".getBytes(StandardCharsets.UTF_8));
        assertThat(this.deliveries.lastError()).as("the body dead-lettered").isNotNull();
        catchThrowable(() -> this.deliveries.deliver(Things.thingHappened()));

        assertThat(count(MicrometerIdempotencyMetrics.HALTS) - halts)
                .as("one halt: the rejected body ended no trial")
                .isEqualTo(1);
    }

    @Test
    void haltsThatFollowEachOtherCountAsOneOnTheGaugeAndFailedTrialsAreCounted() {
        fillTheBusinessTablesDisk();
        double halts = count(MicrometerIdempotencyMetrics.HALTS);

        // Held for its max-hold, tried at each trial, then given back (and not delivered again here).
        long firstDelivered = System.nanoTime();
        catchThrowable(() -> this.deliveries.deliver(Things.thingHappened()));
        await().atMost(Duration.ofSeconds(10))
                .alias("the trial opened with no message to try: consumption resumes")
                .until(() -> this.outage.halt() == null);
        assertThat(count(MicrometerIdempotencyMetrics.TRIALS_FAILED))
                .as("the message held met the outage again at a trial")
                .isPositive();

        // Halts again, and is held its max-hold (1 s) before it is given back.
        catchThrowable(() -> this.deliveries.deliver(Things.thingHappened()));
        double sinceTheFirst = (System.nanoTime() - firstDelivered) / 1e9;
        assertThat(count(MicrometerIdempotencyMetrics.HALTS) - halts).isEqualTo(2);
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.HALTED_NOW)
                        .gauge()
                        .value())
                .as(
                        "counted from the first halt's start (%.1f s ago, both holds and the resume between them), not"
                                + " from the second's (about 1 s ago)",
                        sinceTheFirst)
                .isGreaterThan(sinceTheFirst - 0.5);
    }

    private double count(String name) {
        Counter counter = this.meterRegistry.find(name).counter();
        return counter != null ? counter.count() : 0;
    }

    private void fillTheBusinessTablesDisk() {
        this.jdbcTemplate.execute("""
                CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    RAISE EXCEPTION 'could not extend file "base/16384/16390": No space left on device'
                        USING ERRCODE = 'disk_full';
                END $$;
                CREATE TRIGGER disk_full BEFORE INSERT ON thing_effect FOR EACH ROW EXECUTE FUNCTION disk_full()""");
    }
}
