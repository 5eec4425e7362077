package dev.exactlyonce.idempotency.outage;

import org.jspecify.annotations.Nullable;

/**
 * How a binder takes a delivery back, to deliver it again, when an {@link OutageException} would not do it: one per
 * such binder, registered by its auto-configuration ({@code binder.rabbit}: the exception Spring AMQP's container
 * requeues on). A binding of another binder is given back with an {@code OutageException} (Kafka's error handlers
 * seek back to the record on it).
 *
 * <p>Not API: implemented by the library's binder packages, and may change in any release.
 */
public interface BinderGiveBack {

    /**
     * Whether the binding's binder is this one's: known by the type of the binding's extended consumer properties
     * (which a binder the service wraps, or a proxy of it, keeps), {@code null} for a binder without them.
     */
    boolean binds(Object binder, @Nullable Object consumerProperties);

    /** The exception that gives the delivery back to this binder. */
    RuntimeException givenBack(String reason, Throwable failure);

    /**
     * Whether the broker counts each return of a delivery (RabbitMQ 4.0 to 4.2 against a quorum queue's delivery limit,
     * 3.x where a delivery limit is set): a binding of this binder then stops taking deliveries once it gave one back
     * during an outage, until the probe finds the database answering.
     */
    default boolean countsReturns() {
        return false;
    }
}
