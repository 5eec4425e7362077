package dev.exactlyonce.idempotency.guard;

/**
 * What the library sets and checks on a guarded binding's consumer properties for one binder, picked by the type of
 * the binding's extended consumer properties (the binder it uses, not what is on the class path). See
 * {@link ConsumerSettings}. Not API: implemented by the library's binder packages, and may change in any release.
 *
 * @param <P> the binder's extended consumer properties
 */
public interface BinderConsumerDefaults<P> {

    /** The binder's extended consumer properties, which this sets. */
    Class<P> propertiesType();

    /** Sets the defaults the service did not set, and refuses what the binding cannot run with. */
    void apply(P properties, ConsumerSettings.ConsumerBinding binding);
}
