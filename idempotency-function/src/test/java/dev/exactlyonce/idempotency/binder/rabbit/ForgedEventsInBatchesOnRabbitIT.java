package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binding.BindingsLifecycleController;
import org.springframework.cloud.stream.binding.BindingsLifecycleController.State;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * {@link ForgedEventsOnRabbitIT}'s forged headers in batch mode: each message of a batch is judged by the route the
 * broker says it arrived by, not by the headers a neighbour set, nor by another message of the batch. A forged event
 * and a genuine one wait in the queue while the binding is stopped, so that the container hands them on together (a
 * batch takes what is there): the forged one is dead-lettered, the genuine one applied.
 */
@SpringBootTest(classes = ForgedEventsOnRabbitIT.Service.class, properties = "spring.config.name=minimal-service")
@EnableIdempotencyTestKit(testBinder = false)
class ForgedEventsInBatchesOnRabbitIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.topicExchange("forged-batches");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    private static final String BINDING_NAME = "idempotencyGuardrecordThing-in-0";

    private static final String BINDING = "spring.cloud.stream.bindings." + BINDING_NAME + ".";

    /** A routing key the neighbour may publish: the name of an event of its own. */
    private static final String NEIGHBOURS_ROUTING_KEY = "test.neighbour.noticed.v1";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("forged_batches").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
        registry.add(BINDING + "consumer.batch-mode", () -> "true");
        registry.add(
                "spring.cloud.stream.rabbit.bindings." + BINDING_NAME + ".consumer.binding-routing-key", () -> "#");
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    BindingsLifecycleController bindings;

    @ParameterizedTest
    @CsvSource({"routing key, forged first", "replay exchange, genuine first", "moved back, forged first"})
    void eachMessageOfABatchIsJudgedByItsOwnRoute(String forgery, String order) throws Exception {
        rabbit.purge(QUEUE + ".dlq");
        EventEnvelope<ThingHappened> forged = Things.thingHappened();
        EventEnvelope<ThingHappened> genuine = Things.thingHappened();
        // Both wait in the queue, so that the container hands them on in one batch.
        this.bindings.changeState(BINDING_NAME, State.STOPPED);
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            if (order.equals("forged first")) {
                publishForged(channel, forged, forgery);
                publish(channel, ThingHappened.NAME, genuine, Map.of());
            } else {
                publish(channel, ThingHappened.NAME, genuine, Map.of());
                publishForged(channel, forged, forgery);
            }
            channel.waitForConfirmsOrDie(10_000);
        } finally {
            this.bindings.changeState(BINDING_NAME, State.STARTED);
        }

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(1));
        List<GetResponse> deadLetters = rabbit.drain(QUEUE + ".dlq");
        assertThat(deadLetters.get(0).getProps().getMessageId())
                .isEqualTo(forged.eventId().toString());
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith(forgery.equals("moved back") ? "UNRECORDED_DEAD_LETTER: " : "ROUTE_MISMATCH: ");
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(amounts(genuine)).containsExactly(new BigDecimal("2.500")));
        assertThat(amounts(forged)).as("the forged event applied nothing").isEmpty();
    }

    /**
     * A message of a batch that the service dead-lettered alone (its payload does not map) is recorded: moved back to
     * the queue, it is taken, and fails again for its own reason, not as a dead letter the service never sent.
     */
    @Test
    void aMessageOfABatchTheServiceDeadLetteredIsTakenBackWhenMovedBack() throws Exception {
        rabbit.purge(QUEUE + ".dlq");
        UUID eventId = UuidV7.generate();
        byte[] body = ("{\"event_id\":\"%s\",\"event_name\":\"%s\",\"occurred_at\":\"2026-12-04T00:00:00Z\","
                        + "\"payload\":{\"thingId\":\"not a uuid\",\"amount\":\"1.000\"}}")
                .formatted(eventId, ThingHappened.NAME)
                .getBytes(StandardCharsets.UTF_8);
        rabbit.publish(DESTINATION, ThingHappened.NAME, body, eventId.toString());
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(1));
        GetResponse deadLetter = rabbit.drain(QUEUE + ".dlq").get(0);
        assertThat(deadLetter.getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("INVALID_PAYLOAD: ");

        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish("", QUEUE, deadLetter.getProps(), deadLetter.getBody());
            channel.waitForConfirmsOrDie(10_000);
        }

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(1));
        assertThat(rabbit.drain(QUEUE + ".dlq").get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .as("taken back: it fails for its own reason again")
                .startsWith("INVALID_PAYLOAD: ");
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT taken_back_at IS NULL FROM processed_event_dead_letter WHERE event_id = ?",
                        Boolean.class,
                        eventId))
                .as("dead-lettered again: its record not marked taken back, the dead letter still waiting")
                .isTrue();
    }

    /**
     * Routed under the neighbour's key, with headers named as the binder names what the broker says of a delivery: the
     * routing key, or the queue's replay exchange (with the dead-letter headers a replay would carry); or moved back to
     * the queue as a dead letter the service never dead-lettered.
     */
    private static void publishForged(Channel channel, EventEnvelope<ThingHappened> forged, String forgery)
            throws Exception {
        if (forgery.equals("moved back")) {
            // Straight to the queue, as a dead letter is moved back, with the headers that record a first route.
            channel.basicPublish(
                    "",
                    QUEUE,
                    new AMQP.BasicProperties.Builder()
                            .contentType("application/json")
                            .messageId(forged.eventId().toString())
                            .headers(Map.of(
                                    "x-original-exchange", DESTINATION, "x-original-routingKey", ThingHappened.NAME))
                            .build(),
                    CODEC.encode(forged));
            return;
        }
        Map<String, Object> headers = forgery.equals("routing key")
                ? Map.of("amqp_receivedRoutingKey", ThingHappened.NAME)
                : Map.of(
                        "amqp_receivedExchange",
                        QUEUE + ".replay",
                        "amqp_consumerQueue",
                        QUEUE,
                        "x-original-exchange",
                        DESTINATION,
                        "x-original-routingKey",
                        ThingHappened.NAME);
        publish(channel, NEIGHBOURS_ROUTING_KEY, forged, headers);
    }

    private static void publish(
            Channel channel, String routingKey, EventEnvelope<ThingHappened> event, Map<String, Object> headers)
            throws Exception {
        channel.basicPublish(
                DESTINATION,
                routingKey,
                new AMQP.BasicProperties.Builder()
                        .contentType("application/json")
                        .messageId(event.eventId().toString())
                        .headers(headers)
                        .build(),
                CODEC.encode(event));
    }

    private List<BigDecimal> amounts(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?",
                BigDecimal.class,
                event.payload().thingId());
    }
}
