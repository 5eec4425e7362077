package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * What the outbox's relay refuses at start-up, on a real RabbitMQ and PostgreSQL: a relay that would publish without
 * the broker's confirms would mark nothing published, and publish every row again on every run. A binding the service
 * named like the relay's destination does not replace the relay's own publisher. Settings of a destination with dots
 * written without brackets, which Spring Boot would give another binding, refuse start-up.
 */
class OutboxStartupOnRabbitIT {

    /** A service that only emits. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    /** A service whose guarded function returns the events it emits. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class EmittingService {

        @Bean
        Function<ThingHappened, OutgoingEvent> noticeThing() {
            return thing ->
                    new OutgoingEvent("test.thing.noticed.v1", thing.thingId().toString(), Map.of());
        }
    }

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

    /**
     * The destination's name has dots (it ends with the run's id): written without brackets, Spring Boot binds the
     * setting to a binding named after its first part, and the relay would declare the exchange it was told not to.
     */
    @Test
    void settingsOfADestinationWithDotsWrittenWithoutBracketsRefuseToStart() {
        Throwable failure = Deployment.of(Service.class)
                .on(database)
                .on(rabbit)
                .with(
                        "spring.cloud.stream.default-binder=rabbit",
                        "spring.cloud.function.definition=",
                        "idempotency.outbox.destination=" + EXCHANGE,
                        "spring.cloud.stream.rabbit.bindings." + EXCHANGE + ".producer.declare-exchange=false")
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("spring.cloud.stream.rabbit.bindings." + EXCHANGE + ".producer.declare-exchange")
                .hasMessageContaining(
                        "spring.cloud.stream.rabbit.bindings[" + EXCHANGE + "].producer.declare-exchange");
    }

    /** The same, where the destination is a guarded function's output: refused as the guard is installed. */
    @Test
    void settingsOfAGuardedFunctionsOutputDestinationWithDotsWrittenWithoutBracketsRefuseToStart() {
        Throwable failure = Deployment.of(EmittingService.class)
                .on(database)
                .on(rabbit)
                .with(
                        "spring.cloud.stream.default-binder=rabbit",
                        "spring.cloud.function.definition=idempotencyGuard|noticeThing",
                        "spring.cloud.stream.bindings.idempotencyGuardnoticeThing-in-0.destination="
                                + rabbit.uniqueName("outbox-startup-in"),
                        "spring.cloud.stream.bindings.idempotencyGuardnoticeThing-in-0.group=things",
                        "spring.cloud.stream.bindings.idempotencyGuardnoticeThing-out-0.destination=" + EXCHANGE,
                        "spring.cloud.stream.rabbit.bindings." + EXCHANGE + ".producer.routing-key-expression='x'")
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining(
                        "spring.cloud.stream.rabbit.bindings." + EXCHANGE + ".producer.routing-key-expression")
                .hasMessageContaining(
                        "spring.cloud.stream.rabbit.bindings[" + EXCHANGE + "].producer.routing-key-expression");
    }

    @Test
    void aBindingNamedLikeTheDestinationBoundBeforeTheRelayLeavesTheRelaysOwnPublisherAsItIs() throws Exception {
        String queue = rabbit.uniqueName("outbox-startup-received");
        try (var connection = rabbit.newConnection();
                var channel = connection.createChannel();
                ConfigurableApplicationContext service = Deployment.of(Service.class)
                        .on(database)
                        .on(rabbit)
                        .with(
                                "spring.cloud.stream.default-binder=rabbit",
                                "spring.cloud.function.definition=",
                                "idempotency.outbox.destination=" + EXCHANGE,
                                // Bound as the context starts, before the relay: without the confirms it needs.
                                "spring.cloud.stream.output-bindings=" + EXCHANGE)
                        .start()) {
            channel.exchangeDeclare(EXCHANGE, "topic", true);
            channel.queueDeclare(queue, false, false, true, Map.of());
            channel.queueBind(queue, EXCHANGE, "#");
            UUID id = service.getBean(TransactionTemplate.class)
                    .execute(status -> service.getBean(Outbox.class).emit("test.thing.noticed.v1", "k", Map.of()));
            JdbcTemplate jdbc = service.getBean(JdbcTemplate.class);

            await().atMost(Duration.ofSeconds(30))
                    .alias("the row published with the broker's confirm, and marked")
                    .until(() -> jdbc.queryForObject(
                            "SELECT published_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, id));
            assertThat(rabbit.messageCount(queue)).isEqualTo(1);
        }
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
