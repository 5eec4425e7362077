package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * An attempt met an outage after its claim (a business statement, a declared dependency, the commit): not counted as an
 * attempt, the delivery is held and tried again in place by {@link OutageGiveBack}.
 */
public final class OutageMet extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public OutageMet(RuntimeException cause) {
        super(cause.toString(), cause);
    }
}
