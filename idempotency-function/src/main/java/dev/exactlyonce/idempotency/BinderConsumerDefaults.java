package dev.exactlyonce.idempotency;

import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.BeanWrapper;
import org.springframework.beans.BeanWrapperImpl;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.core.env.Environment;
import org.springframework.util.StringUtils;

/**
 * Sets the binder's own consumer properties of a guarded binding that has a group, before it is bound, unless the
 * service set them either way, for the binding or as the binder's default:
 *
 * <ul>
 *   <li>a dead-letter queue. The guard rejects malformed messages without retry; without a dead-letter queue the
 *       broker would drop them (RabbitMQ discards a rejected message that has nowhere to go, and nothing says it was
 *       lost). RabbitMQ: {@code auto-bind-dlq} (the queue {@code <queue>.dlq}; the binder's {@code republish-to-dlq},
 *       on by default, records the reason in the dead letter's headers); Kafka: {@code enable-dlq} (the topic
 *       {@code error.<destination>.<group>});
 *   <li>on Kafka, with a dead-letter topic, the container's error handler ({@value #KAFKA_ERROR_HANDLER}): it sees
 *       only what the binder's dead-lettering did not take, a record given back during an outage above all, and seeks
 *       back to it every second, without limit. The container's default one would skip the record after ten
 *       failures, losing it.
 * </ul>
 */
final class BinderConsumerDefaults {

    /** The bean name of the error handler of guarded Kafka bindings. */
    static final String KAFKA_ERROR_HANDLER = "idempotencyKafkaErrorHandler";

    private static final Logger logger = LoggerFactory.getLogger(BinderConsumerDefaults.class);

    /** The binders' switches: the property of their consumer properties, and its name in configuration. */
    private static final Map<String, String> SWITCHES =
            Map.of("autoBindDlq", "auto-bind-dlq", "enableDlq", "enable-dlq");

    private final Environment environment;

    private final Binder configuration;

    private final BindingServiceProperties bindings;

    BinderConsumerDefaults(Environment environment, BindingServiceProperties bindings) {
        this.environment = environment;
        this.configuration = Binder.get(environment);
        this.bindings = bindings;
    }

    void apply(Object binder, String bindingName) {
        if (!(binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended)
                || !StringUtils.hasText(
                        this.bindings.getBindingProperties(bindingName).getGroup())) {
            return;
        }
        // spring.cloud.stream.rabbit.default: the binding's own are under spring.cloud.stream.rabbit.bindings.
        String defaults = extended.getDefaultsPrefix();
        String bindings = defaults.substring(0, defaults.lastIndexOf('.')) + ".bindings";
        BeanWrapper consumer = new BeanWrapperImpl(extended.getExtendedConsumerProperties(bindingName));
        SWITCHES.forEach((property, name) -> {
            if (consumer.isWritableProperty(property)
                    && !isSet(bindings + "." + bindingName, bindings + "[" + bindingName + "]", name)
                    && !isSet(defaults, defaults, name)) {
                consumer.setPropertyValue(property, true);
                logger.info(
                        "Binding {} gets a dead-letter queue ({}{}=true), where the messages the guard"
                                + " rejects go; set the property to false to do without",
                        bindingName,
                        bindings + "." + bindingName + ".consumer.",
                        name);
            }
        });
        if (consumer.isWritableProperty("enableDlq")
                && Boolean.TRUE.equals(consumer.getPropertyValue("enableDlq"))
                && consumer.isWritableProperty("commonErrorHandlerBeanName")
                && consumer.getPropertyValue("commonErrorHandlerBeanName") == null) {
            consumer.setPropertyValue("commonErrorHandlerBeanName", KAFKA_ERROR_HANDLER);
        }
    }

    /**
     * Whether the property is set: as written in YAML or properties (the binding name with its case), or in a relaxed
     * form (an environment variable) where the binding name can only keep its case between brackets.
     */
    private boolean isSet(String prefix, String relaxedPrefix, String name) {
        return this.environment.containsProperty(prefix + ".consumer." + name)
                || this.configuration
                        .bind(relaxedPrefix + ".consumer." + name, String.class)
                        .isBound();
    }
}
