package dev.exactlyonce.idempotency.jdbc;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The bounds a guarded transaction sets on the server with its claim, derived from
 * {@code idempotency.outage.socket-timeout}, the client's bound:
 *
 * <ul>
 *   <li>a wait for a lock ends after half of it, and a statement after three quarters (so that a lock waited for says
 *       so): each is a conflict of the message, tried again after a back-off and dead-lettered once its tries are
 *       spent, rather than a socket timeout that halts every binding (a claim waiting on another transaction's claim
 *       of the same event, a row another transaction holds, one message's statement that runs too long);
 *   <li>the server ends the transaction once it stays idle twice as long: a client gone without a word, its close lost
 *       in a network freeze, no longer holds its claim for the hours of TCP's keepalive, every redelivery's claim
 *       waiting on it.
 * </ul>
 *
 * A shorter bound the session already has stays. On PostgreSQL they hold for the transaction only, from the statement
 * after the claim on (the claim's own is bounded as the session was); on MariaDB, which has no setting of a
 * transaction's own, for the session.
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
