package dev.exactlyonce.idempotency.binder.rabbit;

import dev.exactlyonce.idempotency.guard.EventRoutes;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.cloud.stream.binder.test.TestChannelBinder;
import org.springframework.context.annotation.Bean;
import org.springframework.messaging.MessageHeaders;

/**
 * For a test that delivers through the test binder the headers RabbitMQ's binder maps from a message
 * ({@code amqp_receivedRoutingKey} and the like): the routes of the test binder's bindings are read as RabbitMQ's
 * are, from those headers.
 */
@TestConfiguration(proxyBeanMethods = false)
public class TestBinderDeliversAsRabbit {

    @Bean
    EventRoutes testBinderRoutesAsRabbit() {
        RabbitEventRoutes rabbit = new RabbitEventRoutes();
        return new EventRoutes() {

            @Override
            public boolean binds(Object binder, @Nullable Object consumerProperties) {
                return binder instanceof TestChannelBinder;
            }

            @Override
            public @Nullable String route(MessageHeaders headers) {
                return rabbit.route(headers);
            }

            @Override
            public @Nullable String eventName(MessageHeaders headers) {
                return rabbit.eventName(headers);
            }

            @Override
            public boolean movesDeadLettersBack() {
                return rabbit.movesDeadLettersBack();
            }

            @Override
            public boolean movedBack(MessageHeaders headers) {
                return rabbit.movedBack(headers);
            }
        };
    }
}
