package dev.exactlyonce.idempotency.outage;

import org.jspecify.annotations.Nullable;

/**
 * How a binder takes a delivery back where an {@link OutageException} would not do it (RabbitMQ: the exception its
 * container requeues on). Not API: it may change in any release.
 */
public interface BinderGiveBack {

    /** Whether the binding's binder is this one's, by its extended consumer properties' type ({@code null}: none). */
    boolean binds(Object binder, @Nullable Object consumerProperties);

    /** The exception that gives the delivery back to this binder. */
    RuntimeException givenBack(String reason, Throwable failure);

    /** Whether the broker counts returns (RabbitMQ 4.0 to 4.2's quorum queues): the binding then stops after one. */
    default boolean countsReturns() {
        return false;
    }
}
