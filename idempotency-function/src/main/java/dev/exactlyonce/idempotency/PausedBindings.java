package dev.exactlyonce.idempotency;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.stream.binder.Binding;
import org.springframework.cloud.stream.binder.DefaultBinding;
import org.springframework.cloud.stream.binding.BindingService;

/**
 * The guarded bindings an outage pauses, through the binder's own pause ({@link Binding#pause()}), where the binder
 * has one (its inbound endpoint is {@code Pausable}): the Kafka binder pauses the container's partitions, and its consumer goes on polling (and so stays in its
 * group) without being handed records, where a thread held in the listener would have to give its record back before
 * {@code max.poll.interval.ms} ran out, again and again while the outage lasts. The RabbitMQ binder has none: its
 * consumer threads hold their messages. Only the bindings this class paused are resumed, not one an operator paused.
 */
final class PausedBindings {

    private static final Logger logger = LoggerFactory.getLogger(PausedBindings.class);

    private final ObjectProvider<BindingService> bindingService;

    private final Set<String> paused = ConcurrentHashMap.newKeySet();

    /** Per binding, once it is bound: asked on every message. */
    private final Map<String, Boolean> pausable = new ConcurrentHashMap<>();

    PausedBindings(ObjectProvider<BindingService> bindingService) {
        this.bindingService = bindingService;
    }

    /** Whether the binder can pause the binding: then its messages are not held during an outage but given back. */
    boolean isPausable(String bindingName) {
        Boolean known = this.pausable.get(bindingName);
        if (known != null) {
            return known;
        }
        List<Binding<?>> bindings = bindings(bindingName);
        if (bindings.isEmpty()) {
            return false;
        }
        boolean pausable = bindings.stream().allMatch(PausedBindings::isPausable);
        this.pausable.put(bindingName, pausable);
        return pausable;
    }

    void pause(Collection<String> bindingNames) {
        for (String name : bindingNames) {
            for (Binding<?> binding : bindings(name)) {
                if (isPausable(binding) && binding.isRunning() && !binding.isPaused()) {
                    binding.pause();
                    this.paused.add(name);
                    logger.debug("Paused binding {} while a dependency is unavailable", name);
                }
            }
        }
    }

    void resume() {
        for (String name : List.copyOf(this.paused)) {
            for (Binding<?> binding : bindings(name)) {
                if (binding.isPaused()) {
                    binding.resume();
                    logger.debug("Resumed binding {}", name);
                }
            }
            this.paused.remove(name);
        }
    }

    /** A binding the binder can pause without stopping it: {@code Binding.pause()} stops one it cannot. */
    private static boolean isPausable(Binding<?> binding) {
        return binding instanceof DefaultBinding<?> pausable && pausable.isPausable();
    }

    private List<Binding<?>> bindings(String bindingName) {
        BindingService service = this.bindingService.getIfAvailable();
        return service != null ? service.getConsumerBindings(bindingName) : List.of();
    }
}
