package dev.exactlyonce.idempotency.outbox;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * The {@code outbox} health contributor: {@code DOWN} when the oldest row not parked has waited longer than
 * {@code idempotency.outbox.relay.lag-bound} (the relay is failing, or cannot keep up), when rows are parked (their
 * keys wait for an operator), or when the relay's thread is gone; {@code UP} otherwise, with the backlog in its
 * details.
 */
final class OutboxHealthIndicator implements HealthIndicator {

    private final OutboxBacklogQuery backlog;

    private final Duration lagBound;

    private final OutboxRelay relay;

    OutboxHealthIndicator(OutboxBacklogQuery backlog, Duration lagBound, OutboxRelay relay) {
        this.backlog = backlog;
        this.lagBound = lagBound;
        this.relay = relay;
    }

    @Override
    public Health health() {
        OutboxBacklog outbox = this.backlog.read();
        if (outbox == null) {
            return Health.unknown()
                    .withDetail("outbox", "no outbox_event table")
                    .build();
        }
        boolean stalled = this.relay.stalled();
        boolean down = outbox.lag().compareTo(this.lagBound) > 0 || outbox.parked() > 0 || stalled;
        Health.Builder health = down ? Health.down() : Health.up();
        health.withDetail("unpublished", outbox.unpublished())
                .withDetail("lag", outbox.lag().toString())
                .withDetail("lagBound", this.lagBound.toString())
                .withDetail("parked", outbox.parked());
        if (outbox.oldestPublishableAt() != null) {
            health.withDetail(
                    "oldestPublishableAt", outbox.oldestPublishableAt().toString());
        }
        List<Holds.Held> held = this.relay.holds().list();
        if (!held.isEmpty()) {
            health.withDetail(
                    "held",
                    held.stream()
                            .map(hold -> Map.of(
                                    "kind", hold.kind().toString(),
                                    "name", hold.name(),
                                    "since", hold.since().toString(),
                                    "failures", hold.failures(),
                                    "nextTry", hold.until().toString(),
                                    "reason", hold.reason()))
                            .toList());
        }
        if (stalled) {
            health.withDetail("relay", "its thread is gone: restart the service");
        }
        return health.build();
    }
}
