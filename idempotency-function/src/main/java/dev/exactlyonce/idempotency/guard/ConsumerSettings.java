package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.core.env.Environment;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.InterceptableChannel;
import org.springframework.util.StringUtils;

/**
 * Sets a guarded binding's binder consumer properties unless the service set them, and checks what it relies on (a
 * dead-letter queue first, which other settings depend on), through its binder's {@link BinderConsumerDefaults}. See
 * docs/reference.md, "Configuration".
 */
public final class ConsumerSettings {

    private static final Logger logger = LoggerFactory.getLogger(ConsumerSettings.class);

    private final Environment environment;

    private final Binder configuration;

    private final BindingServiceProperties bindings;

    private final List<BinderConsumerDefaults<?>> binders;

    ConsumerSettings(
            Environment environment, BindingServiceProperties bindings, List<BinderConsumerDefaults<?>> binders) {
        this.environment = environment;
        this.configuration = Binder.get(environment);
        this.bindings = bindings;
        this.binders = List.copyOf(binders);
    }

    void apply(Object binder, String bindingName, Set<String> eventNames, InterceptableChannel errorChannel) {
        if (!(binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended)) {
            return;
        }
        Object properties = extended.getExtendedConsumerProperties(bindingName);
        for (BinderConsumerDefaults<?> defaults : this.binders) {
            if (defaults.propertiesType().isInstance(properties)) {
                apply(defaults, properties, new ConsumerBinding(extended, bindingName, eventNames, errorChannel));
                return;
            }
        }
    }

    private static <P> void apply(BinderConsumerDefaults<P> defaults, Object properties, ConsumerBinding binding) {
        defaults.apply(defaults.propertiesType().cast(properties), binding);
    }

    /** A guarded binding, as its binder's defaults see it: its settings, and what the service set itself. */
    public final class ConsumerBinding {

        private final ExtendedPropertiesBinder<?, ?, ?> binder;

        private final String name;

        private final Set<String> eventNames;

        private final InterceptableChannel errorChannel;

        ConsumerBinding(
                ExtendedPropertiesBinder<?, ?, ?> binder,
                String name,
                Set<String> eventNames,
                InterceptableChannel errorChannel) {
            this.binder = binder;
            this.name = name;
            this.eventNames = eventNames;
            this.errorChannel = errorChannel;
        }

        /** Adds a binder's check to the error channel, after the library's and the binder's dead-letter handler. */
        public void interceptErrors(ChannelInterceptor interceptor) {
            this.errorChannel.addInterceptor(interceptor);
        }

        public String name() {
            return this.name;
        }

        /** The names of the events the binding's functions map; empty when they take events of any name. */
        public Set<String> eventNames() {
            return this.eventNames;
        }

        @Nullable
        public String group() {
            return ConsumerSettings.this
                    .bindings
                    .getBindingProperties(this.name)
                    .getGroup();
        }

        public boolean batch() {
            return ConsumerSettings.this
                    .bindings
                    .getConsumerProperties(this.name)
                    .isBatchMode();
        }

        public boolean partitioned() {
            return ConsumerSettings.this
                    .bindings
                    .getConsumerProperties(this.name)
                    .isPartitioned();
        }

        /** The binding's destinations (a RabbitMQ exchange, a Kafka topic), as many as it names. */
        public List<String> destinations() {
            return Stream.of(ConsumerSettings.this
                            .bindings
                            .getBindingDestination(this.name)
                            .split(","))
                    .map(String::trim)
                    .toList();
        }

        /** Whether the service set the binder's consumer property, for the binding or as the binder's default. */
        public boolean isSet(String property) {
            String bindings = bindingsPrefix();
            return isSet(bindings + "." + this.name, bindings + "[" + this.name + "]", property)
                    || isSet(this.binder.getDefaultsPrefix(), this.binder.getDefaultsPrefix(), property);
        }

        /** Whether the property is set, as written or in a relaxed form (the binding's case kept between brackets). */
        private boolean isSet(String prefix, String relaxedPrefix, String property) {
            return ConsumerSettings.this.environment.containsProperty(prefix + ".consumer." + property)
                    || ConsumerSettings.this
                            .configuration
                            .bind(relaxedPrefix + ".consumer." + property, String.class)
                            .isBound();
        }

        /** Where the binding's consumer properties are set: {@code spring.cloud.stream.rabbit.bindings.<binding>}. */
        public String prefix() {
            return bindingsPrefix() + "." + this.name;
        }

        private String bindingsPrefix() {
            String defaults = this.binder.getDefaultsPrefix();
            return defaults.substring(0, defaults.lastIndexOf('.')) + ".bindings";
        }

        /**
         * Gives the binding its binder's dead-letter queue unless the service switched it either way; refuses one the
         * binder gives none (no group, not durable), where the broker would drop the messages the guard rejects.
         *
         * @param durable whether the binding's queue outlives the service (else it gets no dead-letter queue)
         * @param withoutGroup what the binder makes of a binding without a group, for the refusal
         * @param switchOn turns the switch on, once what it relies on was checked
         */
        public void requireDeadLetters(
                String property, boolean on, boolean durable, String withoutGroup, Runnable switchOn) {
            boolean grouped = StringUtils.hasText(group());
            if (grouped && durable) {
                if (!isSet(property)) {
                    switchOn.run();
                    logger.info(
                            "Binding {} gets a dead-letter queue ({}.consumer.{}=true), where the messages the guard"
                                    + " rejects go; set the property to false to do without",
                            this.name,
                            prefix(),
                            property);
                }
                return;
            }
            if (isSet(property) && !on) {
                return;
            }
            String why = grouped
                    ? "has no dead-letter queue: its queue is not durable (durable-subscription: false): the binder"
                            + " gives such a queue no dead-letter queue, and deletes it, with the events still in it,"
                            + " when the service stops"
                    : withoutGroup;
            throw new StartupRefusal(
                    "Binding %s %s. The messages the guard rejects would have nowhere to go: the broker would drop them"
                            .formatted(this.name, why),
                    (grouped
                                    ? "Remove %s.consumer.durable-subscription=false".formatted(prefix())
                                    : "Set spring.cloud.stream.bindings.%s.group=<the service's name> (its queue or"
                                                    .formatted(this.name)
                                            + " consumer group is then durable, shared by the service's instances,"
                                            + " and the library gives it a dead-letter queue)")
                            + "; or, to consume without one, set %s.consumer.%s=false".formatted(prefix(), property));
        }
    }
}
