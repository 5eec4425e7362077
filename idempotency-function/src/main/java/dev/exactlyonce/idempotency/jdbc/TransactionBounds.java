package dev.exactlyonce.idempotency.jdbc;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The bounds a guarded transaction sets on the server with its claim, derived from
 * {@code idempotency.outage.socket-timeout}, the client's bound: a wait for a lock ends after half of it (a conflict of
 * the message, tried again after a back-off, rather than a socket timeout that halts every binding: a claim waiting on
 * another transaction's claim of the same event, say), and the server ends the transaction once it stays idle twice as
 * long (a client gone without a word, its close lost in a network freeze, no longer holds its claim for the hours of
 * TCP's keepalive, every redelivery's claim waiting on it). A shorter bound the session already has stays. On
 * PostgreSQL they hold for the transaction only; on MariaDB, which has no setting of a transaction's own, for the
 * session. Statements are not bounded so: a statement timeout armed at every statement cost the guard a tenth of its
 * throughput, and a slow statement stays an outage at {@code socket-timeout}.
 */
public record TransactionBounds(Duration lockTimeout, Duration idleTimeout) {

    /** The bounds of a socket timeout; {@code null} for none (0). */
    public static @Nullable TransactionBounds of(Duration socketTimeout) {
        if (socketTimeout.isZero() || socketTimeout.isNegative()) {
            return null;
        }
        return new TransactionBounds(socketTimeout.dividedBy(2), socketTimeout.multipliedBy(2));
    }
}
