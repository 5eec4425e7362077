package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.time.Instant;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ObjectProvider;

/** What the library reports: to Micrometer when it is present ({@code MicrometerIdempotencyMetrics}), else nowhere. */
public interface IdempotencyMetrics {

    IdempotencyMetrics NONE = new IdempotencyMetrics() {};

    /** The service's metrics bean (Micrometer's, when it has a registry), or {@link #NONE}. */
    static IdempotencyMetrics of(ObjectProvider<IdempotencyMetrics> metrics) {
        return metrics.getIfAvailable(() -> NONE);
    }

    /** First deliveries of events committed with their effect. */
    default void processed(GuardedBinding binding, int events) {}

    /** Copies of events already processed were discarded. */
    default void duplicates(GuardedBinding binding, int copies) {}

    /** A message was rejected, without retry. */
    default void rejected(GuardedBinding binding, Reason reason) {}

    /** Where the guard's observations go when the service has no {@code ObservationRegistry} of its own. */
    default ObservationRegistry observations() {
        return ObservationRegistry.NOOP;
    }

    /** A purge run deleted rows (or found another instance purging: {@code ran} false, no rows). */
    default void purged(boolean ran, long rows, Duration took) {}

    default void partitionsMaintained(int created, int dropped, Duration took) {}

    /** An outage halted consumption, {@code since} this halt's start or that of the one it closely follows. */
    default void halted(Instant since) {}

    /** The message tried once the probe's write went through met the outage again. */
    default void trialFailed() {}

    /** Consumption resumed after it was halted this long. */
    default void resumed(Duration halted) {}

    /** A delivery was given back to the broker during an outage, to be delivered again. */
    default void givenBack() {}

    /** A committed transaction wrote events to the outbox. */
    default void outboxWritten(int events) {}

    /** The relay published outbox rows, confirmed by the broker, and marked them. */
    default void outboxPublished(int events) {}

    /** A run of the relay did not publish every row it read: they stay unpublished, for a later run. */
    default void outboxPublishFailed() {}

    /** The relay's lag: how long the oldest publishable row has waited, as the relay last saw it. */
    default void outboxLag(Duration lag) {}

    /** The rows parked now, as the relay last saw them. */
    default void outboxParked(long rows) {}

    /** The dead letters waiting to be replayed, the oldest one's time ({@code null}: none), and their retention. */
    default void deadLettersWaiting(long count, @Nullable Instant oldest, Duration retention) {}

    /** The time of the oldest processed id kept ({@code null} when the table is empty), against the retention. */
    default void processedIdsKept(@Nullable Instant oldest, Duration retention) {}
}
