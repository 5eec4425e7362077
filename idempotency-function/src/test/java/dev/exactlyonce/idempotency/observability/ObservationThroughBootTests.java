package dev.exactlyonce.idempotency.observability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.guard.IdempotencyGuard;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.common.KeyValue;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The guard's observation through Spring Boot's observation registry, as a service with Actuator has it: every handler
 * the service declares sees it (a tracing bridge would make it a span), and Boot's meter handler times it as the
 * {@code idempotency.guard} meter.
 */
@SpringBootTest(properties = "idempotency.purge.enabled=false")
@EnableIdempotencyTestKit
class ObservationThroughBootTests {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("observed").registerDataSource(registry);
    }

    /** What a tracing bridge would see: each observation the guard stops, with its key values. */
    static final class Recorder implements ObservationHandler<Observation.Context> {

        final List<Map<String, String>> stopped = new CopyOnWriteArrayList<>();

        @Override
        public void onStop(Observation.Context context) {
            if (context.getName().equals(IdempotencyGuard.OBSERVATION)) {
                this.stopped.add(context.getLowCardinalityKeyValues().stream()
                        .collect(Collectors.toMap(KeyValue::getKey, KeyValue::getValue)));
            }
        }

        @Override
        public boolean supportsContext(Observation.Context context) {
            return true;
        }
    }

    @TestConfiguration
    static class Observed {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }

        @Bean
        Recorder recorder() {
            return new Recorder();
        }
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    Recorder recorder;

    @Autowired
    MeterRegistry meterRegistry;

    @Test
    void eachMessageIsObservedWithItsBindingFunctionAndOutcomeAndTimedAsTheGuardsMeter() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 2);

        assertThat(this.recorder.stopped)
                .containsExactly(
                        Map.of(
                                "binding", "idempotencyGuardrecordThing-in-0",
                                "function", "recordThing",
                                "outcome", "processed"),
                        Map.of(
                                "binding", "idempotencyGuardrecordThing-in-0",
                                "function", "recordThing",
                                "outcome", "duplicate"));
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.GUARD)
                        .tag("outcome", "duplicate")
                        .timer()
                        .count())
                .isEqualTo(1);
    }
}
