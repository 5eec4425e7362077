package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What the binders' packages plug into a guarded binding, each registered by its binder's auto-configuration and used
 * for the bindings of that binder: the consumer defaults and checks, the give-back of a delivery, and the route a
 * message came by.
 */
record BinderAdapters(
        List<BinderConsumerDefaults<?>> consumerDefaults, List<BinderGiveBack> giveBacks, List<EventRoutes> routes) {

    BinderAdapters {
        consumerDefaults = List.copyOf(consumerDefaults);
        giveBacks = List.copyOf(giveBacks);
        routes = List.copyOf(routes);
    }

    /** The binder's reading of a message's route, if it has one. */
    @Nullable
    EventRoutes routesOf(Object binder) {
        return this.routes.stream()
                .filter(routes -> routes.binds(binder))
                .findFirst()
                .orElse(null);
    }
}
