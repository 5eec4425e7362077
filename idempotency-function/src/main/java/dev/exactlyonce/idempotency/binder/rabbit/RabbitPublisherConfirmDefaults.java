package dev.exactlyonce.idempotency.binder.rabbit;

import java.util.Map;
import org.springframework.boot.EnvironmentPostProcessor;
import org.springframework.boot.SpringApplication;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.MapPropertySource;

/**
 * Turns on RabbitMQ's publisher confirms (correlated) unless the service set
 * {@code spring.rabbitmq.publisher-confirm-type} or turned the outbox relay off: the relay marks a row published only
 * once the broker confirmed it. The lowest precedence of all, so that any setting of the service wins.
 */
final class RabbitPublisherConfirmDefaults implements EnvironmentPostProcessor {

    static final String CONFIRM_TYPE = "spring.rabbitmq.publisher-confirm-type";

    @Override
    public void postProcessEnvironment(ConfigurableEnvironment environment, SpringApplication application) {
        if (environment.containsProperty(CONFIRM_TYPE)
                || !environment.getProperty("idempotency.outbox.relay.enabled", Boolean.class, true)) {
            return;
        }
        environment
                .getPropertySources()
                .addLast(new MapPropertySource("idempotencyOutboxDefaults", Map.of(CONFIRM_TYPE, "correlated")));
    }
}
