package dev.exactlyonce.idempotency.outbox;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;

/**
 * The {@code outbox} health contributor: {@code DOWN} when this instance's relay thread is gone, {@code PARKED} or
 * {@code LAGGING} for the outbox every instance shares (answered with 200, out of the aggregate, so that they never
 * take every instance out of a load balancer), {@code UP} otherwise. See docs/outbox.md ("Health").
 */
final class OutboxHealthIndicator implements HealthIndicator {

    /** Rows parked: their keys wait for an operator (the outbox endpoint, or the infra command outbox-parked). */
    static final Status PARKED = new Status("PARKED", "events wait for an operator: see the outbox endpoint");

    /** The oldest row of a key not parked waited longer than the lag bound: the relay is failing, or cannot keep up. */
    static final Status LAGGING = new Status("LAGGING", "the oldest event waited longer than the lag bound");

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
        Health.Builder health = stalled
                ? Health.down()
                : outbox.parked() > 0
                        ? Health.status(PARKED)
                        : outbox.lag().compareTo(this.lagBound) > 0 ? Health.status(LAGGING) : Health.up();
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
