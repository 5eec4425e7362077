package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/** The {@code idempotency} health: {@code OUT_OF_SERVICE} while an outage halts guarded bindings, else {@code UP}. */
final class OutageHealthIndicator implements HealthIndicator {

    private final ConsumptionHalt outage;

    OutageHealthIndicator(ConsumptionHalt outage) {
        this.outage = outage;
    }

    @Override
    public Health health() {
        ConsumptionHalt.Halt halt = this.outage.halt();
        if (halt == null) {
            return Health.up()
                    .withDetail("guardedBindings", this.outage.bindingNames())
                    .build();
        }
        return Health.outOfService()
                .withDetail("guardedBindings", this.outage.bindingNames())
                .withDetail("haltedSince", halt.since().toString())
                .withDetail("cause", halt.cause())
                .build();
    }
}
