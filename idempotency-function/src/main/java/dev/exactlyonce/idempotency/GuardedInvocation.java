package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import org.jspecify.annotations.Nullable;
import org.slf4j.MDC;
import org.springframework.transaction.TransactionStatus;

/**
 * The composed invocation of a guarded binding under way on this thread: its binding, its transaction and whether
 * the guard found the event already processed. Opened and closed by {@link TransactionPerMessage}.
 */
final class GuardedInvocation {

    private static final ThreadLocal<GuardedInvocation> CURRENT = new ThreadLocal<>();

    private final GuardedBinding binding;

    private final TransactionStatus transaction;

    private final @Nullable GuardedInvocation outer;

    private boolean duplicate;

    private int claimed;

    private GuardedInvocation(
            GuardedBinding binding, TransactionStatus transaction, @Nullable GuardedInvocation outer) {
        this.binding = binding;
        this.transaction = transaction;
        this.outer = outer;
    }

    static GuardedInvocation open(GuardedBinding binding, TransactionStatus transaction) {
        GuardedInvocation invocation = new GuardedInvocation(binding, transaction, CURRENT.get());
        CURRENT.set(invocation);
        return invocation;
    }

    static @Nullable GuardedInvocation current() {
        return CURRENT.get();
    }

    /** Whether the invocation under way on this thread is a duplicate, so its business functions must not run. */
    static boolean isDuplicate() {
        GuardedInvocation current = CURRENT.get();
        return current != null && current.duplicate;
    }

    GuardedBinding binding() {
        return this.binding;
    }

    TransactionStatus transaction() {
        return this.transaction;
    }

    void markDuplicate() {
        this.duplicate = true;
    }

    void markClaimed(int events) {
        this.claimed = events;
    }

    /** How many events the guard claimed: once the transaction commits, they are processed. */
    int claimed() {
        return this.claimed;
    }

    void close() {
        MDC.remove(EventHeaders.EVENT_ID);
        MDC.remove(EventHeaders.EVENT_NAME);
        if (this.outer == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(this.outer);
        }
    }
}
