package dev.exactlyonce.idempotency.binder.rabbit;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.GuardInstaller;
import dev.exactlyonce.idempotency.guard.IdempotencyGuardAutoConfiguration;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.context.annotation.Bean;

/** RabbitMQ's binder, where it is: consumer defaults and checks of guarded bindings, and their listener containers. */
@AutoConfiguration(after = IdempotencyGuardAutoConfiguration.class)
@ConditionalOnClass(
        name = {
            RabbitConsumerDefaults.PROPERTIES,
            "org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder",
            "org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer",
            "org.springframework.cloud.stream.config.ListenerContainerCustomizer"
        })
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyRabbitAutoConfiguration {

    @Bean
    RabbitConsumerDefaults idempotencyRabbitConsumerDefaults(
            ListableBeanFactory beanFactory, IdempotencyProperties properties) {
        return new RabbitConsumerDefaults(beanFactory, properties);
    }

    @Bean
    RabbitEventRoutes idempotencyRabbitEventRoutes() {
        return new RabbitEventRoutes();
    }

    @Bean
    RabbitPublishConfirmation idempotencyRabbitPublishConfirmation() {
        return new RabbitPublishConfirmation();
    }

    @Bean
    RabbitGiveBack idempotencyRabbitGiveBack() {
        return new RabbitGiveBack();
    }

    @Bean
    RabbitContainers idempotencyRabbitContainers(
            IdempotencyProperties properties,
            ObjectProvider<GuardInstaller> guardedBindings,
            BindingServiceProperties bindings) {
        return new RabbitContainers(properties.batch().maxWait(), guardedBindings, bindings);
    }
}
