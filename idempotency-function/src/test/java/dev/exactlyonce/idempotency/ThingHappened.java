package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.math.BigDecimal;
import java.util.UUID;

@EventName(ThingHappened.NAME)
record ThingHappened(UUID thingId, BigDecimal amount) {

    static final String NAME = "test.thing.happened.v1";
}
