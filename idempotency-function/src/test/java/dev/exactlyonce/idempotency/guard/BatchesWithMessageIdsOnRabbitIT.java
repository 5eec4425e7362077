package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
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
 * A batch of bare payloads whose ids are the AMQP {@code message_id} ({@code idempotency.event-id.source=message-id}),
 * on a real RabbitMQ: the guard reads each message of the batch with its own headers, so copies are told apart by their
 * own ids, and a message without an id passes through unguarded ({@code when-missing=pass-through}), in its place.
 */
@SpringBootTest(
        classes = BatchesWithMessageIdsOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.batch-mode=true",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.auto-startup=false",
            "idempotency.event-id.source=message-id",
            "idempotency.event-id.when-missing=pass-through",
            "idempotency.batch.max-wait=2s",
            "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.receive-timeout=2000"
        })
@EnableIdempotencyTestKit(testBinder = false)
class BatchesWithMessageIdsOnRabbitIT {

    /** The service: a function of one event, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("batches-message-ids");

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("rabbitbatchids").registerDataSource(registry);
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(DESTINATION + ".things");
        registry.add("spring.cloud.stream.bindings." + BINDING + ".destination", () -> DESTINATION);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".group", () -> "things");
    }

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BindingsLifecycleController bindings;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void eachMessageOfABatchIsReadWithItsOwnIdAndOneWithoutAnIdPassesThrough() {
        UUID a = UUID.randomUUID();
        UUID b = UUID.randomUUID();
        UUID thingA = UUID.randomUUID();
        UUID thingB = UUID.randomUUID();
        UUID unguarded = UUID.randomUUID();
        publish(thingA, a);
        publish(thingB, b);
        publish(unguarded, null);
        publish(thingA, a);
        publish(thingB, b);

        this.bindings.changeState(BINDING, State.STARTED);

        // The five messages attempted before the checks of what the copies did not do: the queue's ready count is
        // zero as soon as the consumer prefetched them.
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.recorder.attempts())
                        .hasSize(5)
                        .allSatisfy(attempt -> assertThat(attempt.failure()).isNull()));
        assertThat(List.of(thingA, thingB, unguarded))
                .allSatisfy(thing -> assertThat(effects(thing)).isEqualTo(1));
        assertThat(this.processedEvents.rows(a)).isEqualTo(1);
        assertThat(this.processedEvents.rows(b)).isEqualTo(1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(DISTINCT xmin::text) FROM thing_effect", Integer.class))
                .as("one batch, one transaction")
                .isEqualTo(1);
    }

    private static void publish(UUID thingId, UUID messageId) {
        byte[] payload = ("{\"thingId\": \"" + thingId + "\", \"amount\": 1.5}").getBytes(UTF_8);
        rabbit.publish(DESTINATION, ThingHappened.NAME, payload, messageId != null ? messageId.toString() : null);
    }

    private int effects(UUID thingId) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?", Integer.class, thingId);
    }
}
