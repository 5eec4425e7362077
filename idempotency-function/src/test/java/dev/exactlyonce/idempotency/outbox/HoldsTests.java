package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** A hold of the relay waits {@code first-hold}, then twice as long at each failure in a row, up to the longest. */
class HoldsTests {

    @Test
    void aRouteHeldAgainAndAgainWaitsTheFirstHoldDoublingUpToTheLongest() {
        Holds holds = new Holds(Duration.ofMillis(200), Duration.ofMillis(500));
        OutboxSender.Row row = new OutboxSender.Row(
                UUID.randomUUID(), "events", "key-1", "test.thing.noticed.v1", "{}", Instant.now());

        List<Duration> waits = new ArrayList<>();
        for (int failure = 1; failure <= 3; failure++) {
            holds.hold(Holds.Kind.ROUTE, row, "reply-code=403");
            waits.add(holds.nextEnd());
        }

        assertThat(waits.get(0)).isBetween(Duration.ofMillis(120), Duration.ofMillis(200));
        assertThat(waits.get(1)).isBetween(Duration.ofMillis(240), Duration.ofMillis(400));
        assertThat(waits.get(2)).as("the longest").isBetween(Duration.ofMillis(300), Duration.ofMillis(500));
        assertThat(holds.holds(row)).isTrue();
    }
}
