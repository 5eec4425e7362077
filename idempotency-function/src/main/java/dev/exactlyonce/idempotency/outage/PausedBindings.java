package dev.exactlyonce.idempotency.outage;

import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
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
import org.springframework.cloud.stream.config.BindingServiceProperties;

/**
 * The guarded bindings an outage pauses, through the binder's own pause ({@link Binding#pause()}), where the binder
 * has one (its inbound endpoint is {@code Pausable}): the Kafka binder pauses the container's partitions, and its
 * consumer goes on polling (and so stays in its group) without being handed records, where a thread held in the
 * listener would have to give its record back before {@code max.poll.interval.ms} ran out, again and again while the
 * outage lasts. The RabbitMQ binder has none: its consumer threads hold their messages. Nor do batch bindings pause
 * (Spring Kafka's batch retry reports a pause as an error each time): they hold, as on RabbitMQ. Only the bindings this
 * class paused are resumed.
 */
public final class PausedBindings {

    private static final Logger logger = LoggerFactory.getLogger(PausedBindings.class);

    private final ObjectProvider<BindingService> bindingService;

    private final ObjectProvider<BindingServiceProperties> bindingProperties;

    /** The bindings this class paused, by identity: a binding bound again since is another. */
    private final Set<Binding<?>> paused =
            Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    /** Per binding, once it is bound: asked on every message. */
    private final Map<String, Boolean> pausable = new ConcurrentHashMap<>();

    public PausedBindings(
            ObjectProvider<BindingService> bindingService, ObjectProvider<BindingServiceProperties> bindingProperties) {
        this.bindingService = bindingService;
        this.bindingProperties = bindingProperties;
    }

    /** Whether the binding is paused during an outage: then its messages are not held but given back at once. */
    boolean isPausable(String bindingName) {
        Boolean known = this.pausable.get(bindingName);
        if (known != null) {
            return known;
        }
        List<Binding<?>> bindings = bindings(bindingName);
        // Not known until it is bound, by the binder that bound it (a late binding is not a DefaultBinding yet).
        if (bindings.isEmpty() || !bindings.stream().allMatch(DefaultBinding.class::isInstance)) {
            return false;
        }
        BindingServiceProperties properties = this.bindingProperties.getIfAvailable();
        boolean batch = properties != null
                && properties.getConsumerProperties(bindingName).isBatchMode();
        boolean pausable = !batch && bindings.stream().allMatch(binding -> ((DefaultBinding<?>) binding).isPausable());
        this.pausable.put(bindingName, pausable);
        return pausable;
    }

    void pause(Collection<String> bindingNames) {
        for (String name : bindingNames) {
            if (!isPausable(name)) {
                continue;
            }
            for (Binding<?> binding : bindings(name)) {
                if (binding.isRunning() && !binding.isPaused()) {
                    binding.pause();
                    this.paused.add(binding);
                    logger.debug("Paused binding {} while a dependency is unavailable", name);
                }
            }
        }
    }

    void resume() {
        List<Binding<?>> toResume;
        synchronized (this.paused) {
            toResume = List.copyOf(this.paused);
            this.paused.clear();
        }
        for (Binding<?> binding : toResume) {
            if (binding.isPaused()) {
                binding.resume();
                logger.debug("Resumed binding {}", binding.getBindingName());
            }
        }
    }

    private List<Binding<?>> bindings(String bindingName) {
        BindingService service = this.bindingService.getIfAvailable();
        return service != null ? service.getConsumerBindings(bindingName) : List.of();
    }
}
