package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A delivery is held at most {@code max-hold} in all, counted from its first attempt, however many of its attempts
 * wait for the outage to end. Here a dependency of the business function is down (it throws an exception declared in
 * {@code idempotency.outage.exceptions}) while the database answers: the probe's write passes every second, each
 * attempt that then tries the message meets the outage again, and the next attempt waits for the next probe. Without
 * one deadline per delivery each of the five attempts waits up to {@code max-hold} (and the give-back once more), so
 * the delivery lasts about five seconds where {@code max-hold} says 1.5; on Kafka that is how a consumer outlives
 * {@code max.poll.interval.ms} and is thrown out of its group.
 */
@SpringBootTest(
        properties = {
            "idempotency.outage.exceptions=dev.exactlyonce.idempotency.outage.OneHoldPerDeliveryTests.ProviderUnavailable",
            "idempotency.outage.probe-initial-interval=1s",
            "idempotency.outage.probe-max-interval=1s",
            "idempotency.outage.max-hold=1500ms",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.max-attempts=5",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// The halt it leaves behind would hold the next tests' messages.
@DirtiesContext
class OneHoldPerDeliveryTests {

    /** The business function's payment provider, say, answering 503. */
    static final class ProviderUnavailable extends RuntimeException {

        private static final long serialVersionUID = 1L;

        ProviderUnavailable() {
            super("the provider answers 503");
        }
    }

    private static final String FUNCTION = "recordThing";

    private static final TestDatabase database = TestPostgres.newDatabase("onehold");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ConsumptionHalt outage;

    @Test
    void aDeliveryIsHeldAtMostMaxHoldInAllWhateverItsAttempts() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        for (int i = 0; i < 10; i++) {
            this.probe.failNextWith(FUNCTION, new ProviderUnavailable());
        }

        long started = System.nanoTime();
        assertThatThrownBy(() -> this.deliveries.deliver(event))
                .as("given back to be delivered again, not dead-lettered")
                .hasStackTraceContaining("given back");
        Duration took = Duration.ofNanos(System.nanoTime() - started);

        assertThat(this.recorder.attempts(event.eventId()))
                .as("the attempt that found the outage, and one tried after the probe's first write went through")
                .hasSizeGreaterThanOrEqualTo(2);
        assertThat(took)
                .as("held max-hold (1.5 s) from the first attempt, not once per attempt (five attempts, one a second)")
                .isLessThan(Duration.ofMillis(2800));
        assertThat(this.deliveries.lastError()).as("not dead-lettered").isNull();

        this.probe.reset();
        await().atMost(Duration.ofSeconds(10)).until(() -> {
            this.deliveries.deliver(event);
            return this.outage.halt() == null;
        });
    }
}
