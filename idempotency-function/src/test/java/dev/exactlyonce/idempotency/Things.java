package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.UUID;

/** Events of the test service. */
public final class Things {

    private Things() {}

    public static EventEnvelope<ThingHappened> thingHappened() {
        return new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), new BigDecimal("2.500")));
    }
}
