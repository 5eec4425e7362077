package dev.exactlyonce.idempotency.jdbc;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The bounds a guarded transaction sets on the server with its claim, from {@code idempotency.outage.socket-timeout}:
 * a lock wait ends at half of it and a statement at three quarters (a conflict of the message, not an outage that
 * halts every binding), and an idle transaction at twice (a client gone silent no longer holds its claim). A shorter
 * bound the session has stays. On PostgreSQL they hold for the transaction only, from the statement after the claim;
 * on MariaDB, for the session. See docs/reference.md, "Configuration".
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
