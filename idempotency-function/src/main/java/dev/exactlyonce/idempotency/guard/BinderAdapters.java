package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import java.util.List;
import java.util.function.BiPredicate;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;

/**
 * What the binders' packages plug into a guarded binding (consumer defaults and checks, a delivery's give-back, the
 * route a message came by), each used for the bindings of its binder, told by their extended consumer properties.
 */
record BinderAdapters(
        List<BinderConsumerDefaults<?>> consumerDefaults, List<BinderGiveBack> giveBacks, List<EventRoutes> routes) {

    BinderAdapters {
        consumerDefaults = List.copyOf(consumerDefaults);
        giveBacks = List.copyOf(giveBacks);
        routes = List.copyOf(routes);
    }

    @Nullable
    EventRoutes routesOf(Object binder, String bindingName) {
        return partOf(this.routes, (routes, consumer) -> routes.binds(binder, consumer), binder, bindingName);
    }

    @Nullable
    BinderGiveBack giveBackOf(Object binder, String bindingName) {
        return partOf(this.giveBacks, (giveBack, consumer) -> giveBack.binds(binder, consumer), binder, bindingName);
    }

    private static <T> @Nullable T partOf(
            List<T> parts, BiPredicate<T, @Nullable Object> binds, Object binder, String bindingName) {
        Object consumer = consumerProperties(binder, bindingName);
        return parts.stream()
                .filter(part -> binds.test(part, consumer))
                .findFirst()
                .orElse(null);
    }

    /** The binding's extended consumer properties: their type tells the binder even where the service wraps it. */
    private static @Nullable Object consumerProperties(Object binder, String bindingName) {
        return binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended
                ? extended.getExtendedConsumerProperties(bindingName)
                : null;
    }
}
