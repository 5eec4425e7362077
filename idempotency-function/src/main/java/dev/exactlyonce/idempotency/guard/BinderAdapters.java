package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import java.util.List;

/**
 * What the binders' packages plug into a guarded binding, each registered by its binder's auto-configuration and used
 * for the bindings of that binder: the consumer defaults and checks, and the give-back of a delivery.
 */
record BinderAdapters(List<BinderConsumerDefaults<?>> consumerDefaults, List<BinderGiveBack> giveBacks) {

    BinderAdapters {
        consumerDefaults = List.copyOf(consumerDefaults);
        giveBacks = List.copyOf(giveBacks);
    }
}
