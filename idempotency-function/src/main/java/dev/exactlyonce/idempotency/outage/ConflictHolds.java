package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * The holds of a message that conflicted, before each try again: {@code first-hold}, doubling up to
 * {@code longest-hold}, {@code max-give-backs} of them; counted for the last {@value #REMEMBERED} messages to conflict.
 */
public final class ConflictHolds {

    static final int REMEMBERED = 10_000;

    private final ExponentialBackOff holds;

    private final Map<Object, BackOffExecution> remembered = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Object, BackOffExecution> eldest) {
            return size() > REMEMBERED;
        }
    };

    public ConflictHolds(IdempotencyProperties.Conflicts settings) {
        this.holds = new ExponentialBackOff(Math.max(1, settings.firstHold().toMillis()), 2);
        this.holds.setMaxInterval(Math.max(1, settings.longestHold().toMillis()));
        this.holds.setMaxAttempts(settings.maxGiveBacks());
    }

    /** The hold before the message's next try; {@code null} once held {@code max-give-backs} times. */
    public @Nullable Duration next(Object message) {
        long hold;
        synchronized (this.remembered) {
            hold = this.remembered
                    .computeIfAbsent(message, key -> this.holds.start())
                    .nextBackOff();
        }
        return hold == BackOffExecution.STOP ? null : Duration.ofMillis(hold);
    }

    /** Forgets the message: a later conflict of it starts from the first hold. */
    public void forget(Object message) {
        synchronized (this.remembered) {
            this.remembered.remove(message);
        }
    }
}
