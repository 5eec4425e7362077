package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.math.BigDecimal;
import java.util.UUID;

@EventName(ThingHappened.NAME)
public record ThingHappened(UUID thingId, BigDecimal amount) {

    public static final String NAME = "test.thing.happened.v1";
}
