package dev.exactlyonce.idempotency.jdbc;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The bounds a guarded transaction sets on the server with its claim, from {@code idempotency.outage.socket-timeout}:
 * a lock wait at half, a statement at three quarters, idleness at twice; a shorter bound stays. On PostgreSQL they hold
 * for the transaction, on MariaDB for the session. See docs/reference.md, "Configuration".
 */
public record TransactionBounds(Duration lockTimeout, Duration statementTimeout, Duration idleTimeout) {

    /** The bounds of a socket timeout; {@code null} for none (0). */
    public static @Nullable TransactionBounds of(Duration socketTimeout) {
        if (socketTimeout.isZero() || socketTimeout.isNegative()) {
            return null;
        }
        return new TransactionBounds(
                socketTimeout.dividedBy(2), socketTimeout.multipliedBy(3).dividedBy(4), socketTimeout.multipliedBy(2));
    }
}
