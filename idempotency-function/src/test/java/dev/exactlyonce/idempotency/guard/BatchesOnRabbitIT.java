package dev.exactlyonce.idempotency.guard;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
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
 * Batches on a real RabbitMQ, for a function of a list ({@code recordThings}) and for a {@code Consumer} of one event
 * that the library calls once per event of the batch ({@code recordThing}): a message that cannot be processed, or an
 * event whose effect fails, goes to the dead-letter queue alone, with its reason, and the rest of its batch is applied
 * once. Each test publishes a whole batch before the binding starts, so that it arrives as one batch of 100.
 */
@SpringBootTest(
        classes = BatchesOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThings;idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            // Long enough for the container to gather the 100 messages waiting in the queue into one batch.
            "idempotency.batch.max-wait=2s"
        })
@EnableIdempotencyTestKit(testBinder = false)
class BatchesOnRabbitIT {

    /** The service: its business functions, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        /** A function of the payloads of a batch. */
        @Bean
        Consumer<List<ThingHappened>> recordThings(JdbcTemplate jdbcTemplate) {
            return things -> jdbcTemplate.batchUpdate(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)",
                    things,
                    things.size(),
                    (statement, thing) -> {
                        statement.setObject(1, thing.thingId());
                        statement.setBigDecimal(2, thing.amount());
                    });
        }

        /** A function of one event, called once per event of a batch. */
        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final Map<String, String> DESTINATIONS = Map.of(
            "recordThings", rabbit.uniqueName("batches"),
            "recordThing", rabbit.uniqueName("batches-one-at-a-time"));

    private static final String GROUP = "things";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("rabbitbatches").registerDataSource(registry);
        rabbit.registerConnection(registry);
        DESTINATIONS.forEach((function, destination) -> {
            rabbit.deleteAtExit(destination + "." + GROUP);
            String binding = "spring.cloud.stream.bindings." + binding(function) + ".";
            registry.add(binding + "destination", () -> destination);
            registry.add(binding + "group", () -> GROUP);
            registry.add(binding + "consumer.batch-mode", () -> "true");
            registry.add(binding + "consumer.max-attempts", () -> "2");
            registry.add(binding + "consumer.back-off-initial-interval", () -> "1");
            registry.add(binding + "consumer.auto-startup", () -> "false");
            // Long enough for the container to gather the 100 messages into one batch however the broker spaces them.
            registry.add(
                    "spring.cloud.stream.rabbit.bindings." + binding(function) + ".consumer.receive-timeout",
                    () -> "2000");
        });
    }

    @Autowired
    BindingsLifecycleController bindings;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    private String function = "";

    @AfterEach
    void stop() {
        this.bindings.changeState(binding(this.function), State.STOPPED);
    }

    @ParameterizedTest
    @ValueSource(strings = {"recordThings", "recordThing"})
    void aBatchOfOneHundredWithFourPoisonMessagesAppliesTheOtherNinetySixOnceAndDeadLettersTheFour(String function) {
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        UUID unmappable = UUID.randomUUID();
        for (int i = 0; i < 100; i++) {
            switch (i) {
                case 10 -> publish(function, ThingHappened.NAME, "hello".getBytes(UTF_8));
                case 30 ->
                    publish(
                            function,
                            ThingHappened.NAME,
                            "{\"event_name\": \"%s\", \"payload\": {}}"
                                    .formatted(ThingHappened.NAME)
                                    .getBytes(UTF_8));
                // Routed by a name the functions map (the queue is bound with those only), naming another.
                case 50 -> publish(function, ThingHappened.NAME, encode(UUID.randomUUID(), "test.other.v1", Map.of()));
                case 90 ->
                    publish(
                            function,
                            ThingHappened.NAME,
                            encode(unmappable, ThingHappened.NAME, Map.of("thing_id", "x")));
                default -> {
                    EventEnvelope<ThingHappened> event = Things.thingHappened();
                    events.add(event);
                    rabbit.publish(DESTINATIONS.get(function), event);
                }
            }
        }

        start(function);

        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(deadLetters(function)).isEqualTo(4));
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(queue(function))).isZero());
        assertThat(events)
                .hasSize(96)
                .allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
        assertThat(transactions(events))
                .as("the 96 events were applied in the batch's transaction")
                .isEqualTo(1);
        assertThat(this.processedEvents.rows(unmappable))
                .as("the claim of the event whose payload does not map was taken back")
                .isZero();
        assertThat(rabbit.drain(queue(function) + ".dlq"))
                .extracting(BatchesOnRabbitIT::reason)
                .satisfiesExactlyInAnyOrder(
                        reason -> assertThat(reason).startsWith("NOT_JSON: "),
                        reason -> assertThat(reason).startsWith("MISSING_EVENT_ID: "),
                        reason -> assertThat(reason).startsWith("ROUTE_MISMATCH: "),
                        reason -> assertThat(reason).startsWith("INVALID_PAYLOAD: "));
    }

    @ParameterizedTest
    @ValueSource(strings = {"recordThings", "recordThing"})
    void aBatchWhoseEffectFailsOnOneEventAppliesTheOthersOnceAndDeadLettersThatOne(String function) {
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        // numeric(12, 3) cannot hold it: the insert fails, whatever the attempt.
        EventEnvelope<ThingHappened> failing = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), new BigDecimal("10000000000")));
        for (int i = 0; i < 100; i++) {
            EventEnvelope<ThingHappened> event = i == 42 ? failing : Things.thingHappened();
            events.add(event);
            rabbit.publish(DESTINATIONS.get(function), event);
        }

        start(function);

        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(deadLetters(function)).isEqualTo(1));
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(queue(function))).isZero());
        List<EventEnvelope<ThingHappened>> others =
                events.stream().filter(event -> event != failing).toList();
        assertThat(others)
                .hasSize(99)
                .allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
        assertThat(effects(failing)).isZero();
        assertThat(this.processedEvents.rows(failing.eventId())).isZero();
        List<GetResponse> deadLetters = rabbit.drain(queue(function) + ".dlq");
        assertThat(deadLetters).hasSize(1);
        assertThat(CODEC.decode(deadLetters.get(0).getBody()).eventId()).isEqualTo(failing.eventId());
        assertThat(reason(deadLetters.get(0))).contains("numeric field overflow");
    }

    /**
     * An event that reached the queue with an empty routing key (the queue bound to the exchange by a key that matches
     * it: {@code ""} here, {@code #} on a broker that lets a user bind so) has no route the binder can tell, and so
     * no route its name can be checked against: it is refused (the check fails closed), and the rest of its batch is
     * applied once.
     */
    @ParameterizedTest
    @ValueSource(strings = {"recordThings", "recordThing"})
    void anEventThatArrivedWithAnEmptyRoutingKeyIsRefusedAndTheRestOfItsBatchApplied(String function) throws Exception {
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueBind(queue(function), DESTINATIONS.get(function), "");
        }
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        EventEnvelope<ThingHappened> unrouted = Things.thingHappened();
        for (int i = 0; i < 10; i++) {
            EventEnvelope<ThingHappened> event = i == 4 ? unrouted : Things.thingHappened();
            if (event == unrouted) {
                publish(function, "", CODEC.encode(event));
            } else {
                events.add(event);
                rabbit.publish(DESTINATIONS.get(function), event);
            }
        }
        try {
            start(function);

            await().atMost(Duration.ofSeconds(60))
                    .untilAsserted(() -> assertThat(deadLetters(function)).isEqualTo(1));
            await().atMost(Duration.ofSeconds(30))
                    .untilAsserted(() ->
                            assertThat(rabbit.messageCount(queue(function))).isZero());
            assertThat(events)
                    .hasSize(9)
                    .allSatisfy(event -> assertThat(effects(event)).isEqualTo(1));
            assertThat(effects(unrouted)).isZero();
            assertThat(rabbit.drain(queue(function) + ".dlq"))
                    .singleElement()
                    .satisfies(deadLetter -> assertThat(reason(deadLetter)).startsWith("ROUTE_MISMATCH: "));
        } finally {
            try (Connection admin = rabbit.newConnection();
                    Channel channel = admin.createChannel()) {
                channel.queueUnbind(queue(function), DESTINATIONS.get(function), "");
            }
        }
    }

    private void start(String function) {
        this.function = function;
        this.bindings.changeState(binding(function), State.STARTED);
    }

    private static String binding(String function) {
        return "idempotencyGuard" + function + "-in-0";
    }

    private static String queue(String function) {
        return DESTINATIONS.get(function) + "." + GROUP;
    }

    private static int deadLetters(String function) {
        return rabbit.messageCount(queue(function) + ".dlq");
    }

    private static void publish(String function, String routingKey, byte[] body) {
        rabbit.publish(DESTINATIONS.get(function), routingKey, body, null);
    }

    private static byte[] encode(UUID eventId, String eventName, Map<String, Object> payload) {
        return CODEC.encode(new EventEnvelope<>(eventId, eventName, Instant.now(), payload));
    }

    private static String reason(GetResponse deadLetter) {
        return String.valueOf(deadLetter.getProps().getHeaders().get("x-exception-message"));
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
    }

    /** How many transactions wrote the events' effects: rows a transaction wrote share its id ({@code xmin}). */
    private int transactions(List<EventEnvelope<ThingHappened>> events) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(DISTINCT xmin::text) FROM thing_effect WHERE thing_id = ANY (?::uuid[])",
                Integer.class,
                (Object) events.stream()
                        .map(event -> event.payload().thingId().toString())
                        .toArray(String[]::new));
    }
}
