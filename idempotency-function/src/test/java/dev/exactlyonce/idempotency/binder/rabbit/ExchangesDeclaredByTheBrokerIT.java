package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.guard.GuardInstaller;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A guarded binding on RabbitMQ that declares no exchange ({@code declare-exchange: false}, {@code declare-dlx:
 * false}, as a service whose broker user may not configure exchanges) starts when the broker has them, and refuses to
 * start, naming them, when it has not: its queue would receive nothing, or its dead letters would be lost.
 */
class ExchangesDeclaredByTheBrokerIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final TestDatabase database = TestPostgres.newDatabase("exchanges");

    private static final String RABBIT =
            "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.";

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing() {
            return thing -> {};
        }
    }

    @Test
    void aBindingStartsWhenTheBrokerHasItsExchanges() {
        String exchange = rabbit.topicExchange("declared");
        rabbit.directExchange(exchange + ".dlx");

        try (ConfigurableApplicationContext service = start(exchange)) {
            assertThat(service.getBean(GuardInstaller.class).bindings()).hasSize(1);
        }
    }

    @Test
    void aBindingRefusesToStartWhenTheBrokerLacksAnExchangeItDoesNotDeclare() {
        String missing = rabbit.uniqueName("missing");

        assertThatThrownBy(() -> start(missing).close())
                .satisfies(failure -> assertThat(Failures.find(failure, IdempotencyException.class))
                        .hasMessageContaining("Binding idempotencyGuardrecordThing-in-0 declares no exchange")
                        .hasMessageContaining("the broker has none named [" + missing + ", " + missing + ".dlx]"));
    }

    private ConfigurableApplicationContext start(String destination) {
        rabbit.deleteAtExit(destination + ".things");
        return Deployment.of(Service.class)
                .on(database)
                .on(rabbit)
                .with(
                        "spring.config.name=minimal-service",
                        "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.destination=" + destination,
                        "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.group=things",
                        RABBIT + "declare-exchange=false",
                        RABBIT + "declare-dlx=false",
                        RABBIT + "dead-letter-exchange=" + destination + ".dlx")
                .start();
    }
}
