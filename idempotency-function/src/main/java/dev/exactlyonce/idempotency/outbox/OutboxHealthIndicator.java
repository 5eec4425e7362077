package dev.exactlyonce.idempotency.outbox;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;

/**
 * The {@code outbox} health contributor: {@code DOWN} when this instance's relay thread is gone (restarting the
 * instance mends it); {@code PARKED} when rows are parked (their keys wait for an operator), {@code LAGGING} when the
 * oldest row of a key not parked has waited longer than {@code idempotency.outbox.relay.lag-bound}; {@code UP}
 * otherwise; with the backlog, and the destinations and routes the relay waits out, in its details. Parked rows and
 * the lag are the outbox's, shared by every instance: their statuses are of the outbox's own, which Spring Boot's
 * health leaves out of the aggregate and answers with 200, so that they never take every instance out of a load
 * balancer or a readiness check. Alert on them (the {@code idempotency.outbox.parked} and {@code .lag} gauges).
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
