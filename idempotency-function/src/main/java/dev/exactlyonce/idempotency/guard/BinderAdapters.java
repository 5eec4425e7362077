package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import java.util.List;
import java.util.function.BiPredicate;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;

/**
 * What the binders' packages plug into a guarded binding, each registered by its binder's auto-configuration and used
 * for the bindings of that binder (known by the type of their extended consumer properties): the consumer defaults
 * and checks, the give-back of a delivery, and the route a message came by.
 */
record BinderAdapters(
        List<BinderConsumerDefaults<?>> consumerDefaults, List<BinderGiveBack> giveBacks, List<EventRoutes> routes) {

    BinderAdapters {
        consumerDefaults = List.copyOf(consumerDefaults);
        giveBacks = List.copyOf(giveBacks);
        routes = List.copyOf(routes);
    }

    /** The binding's binder's reading of a message's route, if it has one. */
    @Nullable
    EventRoutes routesOf(Object binder, String bindingName) {
        return partOf(this.routes, (routes, consumer) -> routes.binds(binder, consumer), binder, bindingName);
    }

    /** The binding's binder's own give-back, if it has one. */
    @Nullable
    BinderGiveBack giveBackOf(Object binder, String bindingName) {
        return partOf(this.giveBacks, (giveBack, consumer) -> giveBack.binds(binder, consumer), binder, bindingName);
    }

    /** The first of the parts that binds the binding's binder, told by its extended consumer properties. */
    private static <T> @Nullable T partOf(
            List<T> parts, BiPredicate<T, @Nullable Object> binds, Object binder, String bindingName) {
        Object consumer = consumerProperties(binder, bindingName);
        return parts.stream()
                .filter(part -> binds.test(part, consumer))
                .findFirst()
                .orElse(null);
    }

    /**
     * The binding's extended consumer properties, whose type says the binder, as for the consumer defaults
     * ({@link ConsumerSettings}): a binder the service wraps, or a proxy of it, has them too.
     */
    private static @Nullable Object consumerProperties(Object binder, String bindingName) {
        return binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended
                ? extended.getExtendedConsumerProperties(bindingName)
                : null;
    }
}
