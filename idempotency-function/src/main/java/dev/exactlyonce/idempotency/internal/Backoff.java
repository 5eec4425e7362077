package dev.exactlyonce.idempotency.internal;

import java.time.Duration;

/**
 * A wait that doubles after each failure, up to a cap: the outage probe's and the start-up wait's intervals, the outbox
 * relay's retry delay, the hold before a conflict's give-back.
 */
public final class Backoff {

    private Backoff() {}

    /** The interval after this one: twice as long, at most {@code cap}. */
    public static Duration doubled(Duration interval, Duration cap) {
        Duration doubled = interval.multipliedBy(2);
        return doubled.compareTo(cap) > 0 ? cap : doubled;
    }

    /**
     * The wait after {@code failures} failures in a row (at least one): {@code first}, doubled each time, at most
     * {@code cap}.
     */
    public static Duration after(int failures, Duration first, Duration cap) {
        Duration wait = first.multipliedBy(1L << Math.min(Math.max(failures - 1, 0), 30));
        return wait.compareTo(cap) > 0 ? cap : wait;
    }
}
