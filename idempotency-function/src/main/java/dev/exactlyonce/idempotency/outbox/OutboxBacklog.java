package dev.exactlyonce.idempotency.outbox;

import java.time.Duration;
import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * What waits in the outbox, as the {@code idempotency} and {@code outbox} endpoints and health contributor show it.
 *
 * @param unpublished the rows not yet published, counted up to {@value #COUNTED}
 * @param oldestPublishableAt when the oldest row of a key not parked became publishable, if there is one
 * @param lag how long it has waited since (zero when there is none)
 * @param parked the rows parked after the broker refused them, holding their keys back
 */
public record OutboxBacklog(long unpublished, @Nullable Instant oldestPublishableAt, Duration lag, long parked) {

    /** The most unpublished rows counted: beyond, the count reads this, and a count would cost a read of every row. */
    public static final int COUNTED = 100_001;
}
