package dev.exactlyonce.idempotency;

import java.time.Duration;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * The {@code outbox} health contributor: {@code DOWN} when the oldest unpublished row has waited longer than
 * {@code idempotency.outbox.relay.lag-bound} (the relay is off, failing, or cannot keep up), {@code UP} otherwise,
 * with the backlog in its details.
 */
final class OutboxHealthIndicator implements HealthIndicator {

    private final OutboxBacklog backlog;

    private final Duration lagBound;

    OutboxHealthIndicator(OutboxBacklog backlog, Duration lagBound) {
        this.backlog = backlog;
        this.lagBound = lagBound;
    }

    @Override
    public Health health() {
        IdempotencyEndpoint.Outbox outbox = this.backlog.read();
        if (outbox == null) {
            return Health.unknown()
                    .withDetail("outbox", "no outbox_event table")
                    .build();
        }
        Health.Builder health = outbox.lag().compareTo(this.lagBound) > 0 ? Health.down() : Health.up();
        health.withDetail("unpublished", outbox.unpublished())
                .withDetail("lag", outbox.lag().toString())
                .withDetail("lagBound", this.lagBound.toString());
        if (outbox.oldestWrittenAt() != null) {
            health.withDetail(
                    "oldestUnpublishedWrittenAt", outbox.oldestWrittenAt().toString());
        }
        return health.build();
    }
}
