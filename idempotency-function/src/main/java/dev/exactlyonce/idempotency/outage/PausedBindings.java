package dev.exactlyonce.idempotency.outage;

import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.stream.binder.Binding;
import org.springframework.cloud.stream.binder.DefaultBinding;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;

/**
 * The guarded bindings an outage pauses where the binder can, or stops once one gave a delivery back where the broker
 * counts returns; it resumes only those. See docs/operations.md, "When things go wrong".
 */
public final class PausedBindings {

    private static final Logger logger = LoggerFactory.getLogger(PausedBindings.class);

    private final ObjectProvider<BindingService> bindingService;

    private final ObjectProvider<BindingServiceProperties> bindingProperties;

    /** The bindings this class paused, by identity: a binding bound again since is another. */
    private final Set<Binding<?>> paused =
            Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    private final Set<Binding<?>> stopped =
            Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    /** Per binding, once it is bound: asked on every message. */
    private final Map<String, Boolean> pausable = new ConcurrentHashMap<>();

    /** The bindings whose broker counts each return of a delivery. */
    private final Set<String> countingReturns = ConcurrentHashMap.newKeySet();

    /** Per binding asked to stop taking deliveries, when it was asked, in {@link System#nanoTime()}. */
    private final Map<String, Long> stopRequests = new ConcurrentHashMap<>();

    /** Per binding asked to stop, when the probe began stopping it (its consumers cancelled), in nanoTime. */
    private final Map<String, Long> stopsBegun = new ConcurrentHashMap<>();

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

    /** The binding's broker counts each return of a delivery: it stops taking deliveries once it gave one back. */
    void countsReturns(String bindingName) {
        this.countingReturns.add(bindingName);
    }

    /** Where the broker counts returns, asks that the binding stop until the outage ends; {@code true} if asked now. */
    boolean stopTakingDeliveries(String bindingName) {
        return this.countingReturns.contains(bindingName)
                && this.stopRequests.putIfAbsent(bindingName, System.nanoTime()) == null;
    }

    /** When the binding was asked to stop taking deliveries, in {@link System#nanoTime()}; {@code null} if not. */
    @Nullable
    Long stopRequestedAt(String bindingName) {
        return this.stopRequests.get(bindingName);
    }

    /** When the probe began stopping the binding, in {@link System#nanoTime()}; {@code null} if not yet. */
    @Nullable
    Long stopBeganAt(String bindingName) {
        return this.stopsBegun.get(bindingName);
    }

    /** Pauses the bindings that pause, and stops those asked to stop taking deliveries. */
    void pause(Collection<String> bindingNames) {
        for (String name : bindingNames) {
            if (this.stopRequests.containsKey(name)) {
                stop(name);
            }
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

    private void stop(String name) {
        // Before the stop, which returns only once the consumer threads let go of their messages: they give them
        // back a moment after, once the consumers are cancelled, so that none comes back to them.
        this.stopsBegun.putIfAbsent(name, System.nanoTime());
        for (Binding<?> binding : bindings(name)) {
            if (binding.isRunning() && this.stopped.add(binding)) {
                binding.stop();
                logger.debug(
                        "Binding {} stops taking deliveries until the database answers again: its broker counts each"
                                + " return of a delivery",
                        name);
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
        this.stopRequests.clear();
        this.stopsBegun.clear();
        List<Binding<?>> toStart;
        synchronized (this.stopped) {
            toStart = List.copyOf(this.stopped);
            this.stopped.clear();
        }
        for (Binding<?> binding : toStart) {
            if (!binding.isRunning()) {
                binding.start();
                logger.debug("Binding {} takes deliveries again", binding.getBindingName());
            }
        }
    }

    private List<Binding<?>> bindings(String bindingName) {
        BindingService service = this.bindingService.getIfAvailable();
        return service != null ? service.getConsumerBindings(bindingName) : List.of();
    }
}
