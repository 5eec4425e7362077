package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binding.BindingsLifecycleController;
import org.springframework.cloud.stream.binding.BindingsLifecycleController.State;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A batch that does not fill is handed on once {@code idempotency.batch.max-wait} has passed since it began, on a real
 * RabbitMQ: the binding waits a minute for each next message ({@code receive-timeout}) and takes batches of 100, and
 * three events are there. Without the bound, the listener container would hold them until a minute passed without a
 * message.
 */
@SpringBootTest(
        classes = BatchMaxWaitOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThings",
            "spring.cloud.stream.default-binder=rabbit",
            "idempotency.batch.max-wait=500ms"
        })
@EnableIdempotencyTestKit(testBinder = false)
class BatchMaxWaitOnRabbitIT {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<List<ThingHappened>> recordThings(JdbcTemplate jdbcTemplate) {
            return things -> things.forEach(thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount()));
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("max-wait");

    private static final String GROUP = "things";

    private static final String BINDING = "idempotencyGuardrecordThings-in-0";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("maxwait").registerDataSource(registry);
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(DESTINATION + "." + GROUP);
        String binding = "spring.cloud.stream.bindings." + BINDING + ".";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> GROUP);
        registry.add(binding + "consumer.batch-mode", () -> "true");
        registry.add(binding + "consumer.auto-startup", () -> "false");
        registry.add("spring.cloud.stream.rabbit.bindings." + BINDING + ".consumer.receive-timeout", () -> "60000");
    }

    @Autowired
    BindingsLifecycleController bindings;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void aBatchThatDoesNotFillIsHandedOnAfterMaxWaitNotAfterTheReceiveTimeout() {
        List<EventEnvelope<ThingHappened>> events =
                List.of(Things.thingHappened(), Things.thingHappened(), Things.thingHappened());
        events.forEach(event -> rabbit.publish(DESTINATION, event));

        this.bindings.changeState(BINDING, State.STARTED);
        try {
            await().alias("the three events applied, well before the receive timeout of a minute")
                    .atMost(Duration.ofSeconds(20))
                    .until(() -> effects(events) == 3);
            assertThat(this.jdbcTemplate.queryForObject(
                            "SELECT count(DISTINCT xmin::text) FROM thing_effect", Integer.class))
                    .as("the three events came in one batch, committed once")
                    .isEqualTo(1);
        } finally {
            this.bindings.changeState(BINDING, State.STOPPED);
        }
    }

    private int effects(List<EventEnvelope<ThingHappened>> events) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ANY (?::uuid[])", Integer.class, (Object)
                        events.stream()
                                .map(event -> event.payload().thingId().toString())
                                .toArray(String[]::new));
    }
}
