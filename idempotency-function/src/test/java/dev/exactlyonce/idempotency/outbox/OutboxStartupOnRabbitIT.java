package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Configuration;

/**
 * What the outbox's relay refuses at start-up, on a real RabbitMQ and PostgreSQL: a relay that would publish without
 * the broker's confirms would mark nothing published, and publish every row again on every run.
 */
class OutboxStartupOnRabbitIT {

    /** A service that only emits. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final TestDatabase database = TestPostgres.newDatabase("outboxstartup");

    private static final String EXCHANGE = rabbit.topicExchange("outbox-startup");

    @ParameterizedTest
    @ValueSource(strings = {"none", "simple"})
    void aRelayWithoutCorrelatedPublisherConfirmsRefusesToStart(String confirmType) {
        Throwable failure = Deployment.of(Service.class)
                .on(database)
                .on(rabbit)
                .with(
                        "spring.cloud.stream.default-binder=rabbit",
                        "spring.cloud.function.definition=",
                        "idempotency.outbox.destination=" + EXCHANGE,
                        "spring.rabbitmq.publisher-confirm-type=" + confirmType)
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("spring.rabbitmq.publisher-confirm-type: correlated")
                .hasMessageContaining("idempotency.outbox.relay.enabled: false");
    }

    @Test
    void aBindingNamedLikeTheDestinationBoundBeforeTheRelayCouldSetItUpRefusesToStart() {
        Throwable failure = Deployment.of(Service.class)
                .on(database)
                .on(rabbit)
                .with(
                        "spring.cloud.stream.default-binder=rabbit",
                        "spring.cloud.function.definition=",
                        "idempotency.outbox.destination=" + EXCHANGE,
                        // Bound as the context starts, before the relay: without the confirms the relay needs.
                        "spring.cloud.stream.output-bindings=" + EXCHANGE)
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("spring.cloud.stream.output-bindings")
                .hasMessageContaining(EXCHANGE);
    }

    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void anInstanceThatDisagreesWithTheSchemasOthersOnWhoPublishesTheOutboxRefusesToStart(boolean relayFirst) {
        TestDatabase schema = TestPostgres.newDatabase("outboxmode");
        deployment(schema, relayFirst).start().close();

        Throwable failure = deployment(schema, !relayFirst).startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("idempotency.outbox.relay.enabled: " + relayFirst);
    }

    private static Deployment deployment(TestDatabase schema, boolean relay) {
        return Deployment.of(Service.class)
                .on(schema)
                .on(rabbit)
                .with(
                        "spring.cloud.stream.default-binder=rabbit",
                        "spring.cloud.function.definition=",
                        "idempotency.outbox.destination=" + EXCHANGE,
                        "idempotency.outbox.relay.enabled=" + relay);
    }
}
