package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * A message's attempt met an outage after its claim (a business statement, a declared dependency, the outbox's write,
 * the commit). The binder does not count it as an attempt: {@link OutageGiveBack} holds the delivery and tries it
 * again in place, and gives it back to the broker once {@code max-hold} ran out.
 */
public final class OutageMet extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public OutageMet(RuntimeException cause) {
        super(cause.toString(), cause);
    }
}
