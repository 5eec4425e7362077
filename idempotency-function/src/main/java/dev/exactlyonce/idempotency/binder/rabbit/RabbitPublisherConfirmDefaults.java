package dev.exactlyonce.idempotency.binder.rabbit;

import java.util.Map;
import org.springframework.boot.EnvironmentPostProcessor;
import org.springframework.boot.SpringApplication;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.MapPropertySource;

/**
 * Turns on correlated publisher confirms unless the service set {@code spring.rabbitmq.publisher-confirm-type} or
 * turned the relay off: the relay marks a row published once confirmed. Lowest precedence: any setting wins.
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
