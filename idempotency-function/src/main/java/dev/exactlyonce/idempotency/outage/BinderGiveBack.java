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

    /**
     * Whether the broker counts each return of a delivery (RabbitMQ 4.0 to 4.2's quorum queues): the first hold of the
     * binding to run out then stops it taking deliveries (its held messages go back as it stops), until the probe's
     * write goes through.
     */
    default boolean countsReturns() {
        return false;
    }
}
