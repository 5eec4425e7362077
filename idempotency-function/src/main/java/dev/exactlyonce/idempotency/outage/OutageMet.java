package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * A message's attempt met an outage after its claim: a business statement, a dependency the service declares
 * ({@code idempotency.outage.exceptions}), what the business function emitted, or the commit. Not the message's
 * failure, so the binder does not retry it as one of the message's attempts: {@link OutageGiveBack} holds the delivery
 * and tries it again in place once the probe finds the database answering, and gives it back to the broker only when
 * its {@code max-hold} ran out.
 */
public final class OutageMet extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public OutageMet(RuntimeException cause) {
        super(cause.toString(), cause);
    }
}
