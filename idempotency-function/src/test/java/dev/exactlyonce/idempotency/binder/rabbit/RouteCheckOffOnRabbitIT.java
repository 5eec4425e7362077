package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * With the route check off (routing keys that are not event names), the library leaves the binder's binding of the
 * queue as it is ({@code #}): it binds a queue with the names of the events its functions map only where routing keys
 * are those names. Here an event routed under a key of its own still reaches the service. With the check on, a binder
 * whose routes the library cannot read is refused at start-up, and so is a function that names no event on a queue
 * bound to nothing in particular.
 */
@SpringBootTest(
        classes = RouteCheckOffOnRabbitIT.Service.class,
        properties = {"spring.config.name=minimal-service", "idempotency.event-id.route-check=false"})
@EnableIdempotencyTestKit(testBinder = false)
class RouteCheckOffOnRabbitIT {

    /** The service: its business function, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }

        /** A function that names no event: its input is any JSON object. */
        @Bean
        Consumer<JsonNode> recordAnything() {
            return payload -> {};
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("route-check-off");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("routecheckoff").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
    }

    @Test
    void anEventUnderAKeyOfItsOwnReachesTheService() {
        EventEnvelope<ThingHappened> other = new EventEnvelope<>(
                UUID.randomUUID(),
                "test.other.thing.v1",
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), BigDecimal.ONE));

        rabbit.publish(DESTINATION, other);

        await().atMost(Duration.ofSeconds(30))
                .alias("delivered, and dead-lettered: no function maps it")
                .until(() -> rabbit.messageCount(QUEUE + ".dlq") == 1);
        assertThat(rabbit.drain(QUEUE + ".dlq").get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("UNKNOWN_EVENT: ");
    }

    /**
     * With the check on, a binder whose routes the library cannot read (here RabbitMQ's, with the library's part for it
     * left out) is refused at start-up, rather than guarded unchecked: the check fails closed.
     */
    @Test
    void withTheCheckOnABinderWhoseRoutesTheLibraryCannotReadIsRefused() {
        Throwable failure = Deployment.of(Service.class)
                .on(TestPostgres.newDatabase("routecheckunread"))
                .on(rabbit)
                .with(
                        "spring.config.name=minimal-service",
                        "spring.cloud.function.definition=idempotencyGuard|recordThing",
                        "spring.autoconfigure.exclude=" + IdempotencyRabbitAutoConfiguration.class.getName())
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("not one whose routes the library reads")
                .satisfies(refusal ->
                        assertThat(((StartupRefusal) refusal).action()).contains("route-check=false"));
    }

    /**
     * With the check on, a function that names no event, on a queue the service does not bind itself, is refused at
     * start-up: the binder would bind its queue with {@code #}, and it would take every event any publisher sends to the
     * exchange. Bound by the service to the keys it takes, it starts.
     */
    @Test
    void withTheCheckOnAFunctionThatNamesNoEventIsRefusedUnlessItsQueueIsBoundToWhatItTakes() {
        String binding = "spring.cloud.stream.bindings.idempotencyGuardrecordAnything-in-0.";
        String[] settings = {
            "spring.config.name=minimal-service",
            "spring.cloud.function.definition=idempotencyGuard|recordAnything",
            binding + "destination=" + DESTINATION,
            binding + "group=anything"
        };
        rabbit.deleteAtExit(DESTINATION + ".anything");

        Throwable failure = Deployment.of(Service.class)
                .on(TestPostgres.newDatabase("routecheckanything"))
                .on(rabbit)
                .with(settings)
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("its functions name no event")
                .satisfies(refusal ->
                        assertThat(((StartupRefusal) refusal).action()).contains("binding-routing-key"));
        try (ConfigurableApplicationContext bound = Deployment.of(Service.class)
                .on(TestPostgres.newDatabase("routecheckanythingbound"))
                .on(rabbit)
                .with(settings)
                .with("spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordAnything-in-0.consumer"
                        + ".binding-routing-key=" + ThingHappened.NAME)
                .start()) {
            assertThat(bound.isRunning()).isTrue();
        }
    }
}
