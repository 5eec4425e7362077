package dev.exactlyonce.idempotency.observability;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.guard.IdempotencyGuard;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.slf4j.MDC;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The guard's meters, recorded in a {@link SimpleMeterRegistry}, and the logging MDC while a message is handled. The
 * service has no observation registry that does anything (Spring Boot's is left out; the test binder's has no handler):
 * the library times the guard's observations itself.
 */
@SpringBootTest(
        properties = {
            "idempotency.purge.enabled=false",
            "spring.autoconfigure.exclude="
                    + "org.springframework.boot.micrometer.observation.autoconfigure.ObservationAutoConfiguration"
        })
@EnableIdempotencyTestKit
class ObservabilityTests {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("meters").registerDataSource(registry);
    }

    @TestConfiguration
    static class Meters {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Autowired
    MeterRegistry meterRegistry;

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.of(IdempotencyGuard.class);

    @AfterEach
    void release() {
        this.probe.reset();
    }

    @Test
    void countsProcessedDuplicateAndRejectedMessagesAndTimesTheGuardPerFunctionAndOutcome() {
        double processed = count(MicrometerIdempotencyMetrics.PROCESSED);
        double duplicates = count(MicrometerIdempotencyMetrics.DUPLICATES);
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 3);
        this.deliveries.deliverBody("not json".getBytes(UTF_8));
        this.probe.failNext("recordThing", 2);
        this.deliveries.deliver(Things.thingHappened());

        assertThat(count(MicrometerIdempotencyMetrics.PROCESSED) - processed)
                .as("a first delivery that rolled back is not processed")
                .isEqualTo(1);
        assertThat(count(MicrometerIdempotencyMetrics.DUPLICATES) - duplicates).isEqualTo(2);
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.REJECTED)
                        .tag("function", "recordThing")
                        .tag("reason", "NOT_JSON")
                        .counter()
                        .count())
                .isEqualTo(1);
        assertThat(guardTimings("processed"))
                .as("the first event once, the second twice (both attempts rolled back)")
                .isEqualTo(3);
        assertThat(guardTimings("duplicate")).isEqualTo(2);
        assertThat(guardTimings("rejected")).isEqualTo(1);
    }

    private long guardTimings(String outcome) {
        return this.meterRegistry
                .get(MicrometerIdempotencyMetrics.GUARD)
                .tag("function", "recordThing")
                .tag("binding", "idempotencyGuardrecordThing-in-0")
                .tag("outcome", outcome)
                .timer()
                .count();
    }

    @Test
    void theEventIdAndNameAreInTheMdcWhileTheMessageIsHandledAndGoneAfter() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 2);

        assertThat(this.logs.events())
                .filteredOn(log ->
                        log.getFormattedMessage().contains(event.eventId().toString()))
                .isNotEmpty()
                .allSatisfy(log -> assertThat(log.getMDCPropertyMap())
                        .containsEntry("event_id", event.eventId().toString())
                        .containsEntry("event_name", ThingHappened.NAME));
        assertThat(MDC.get("event_id")).isNull();
    }

    private double count(String name) {
        Counter counter =
                this.meterRegistry.find(name).tag("function", "recordThing").counter();
        return counter != null ? counter.count() : 0;
    }
}
