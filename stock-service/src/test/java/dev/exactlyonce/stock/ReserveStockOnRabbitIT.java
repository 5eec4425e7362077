package dev.exactlyonce.stock;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.DeliveryRecorder.Attempt;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * stock-service on a real RabbitMQ and PostgreSQL, with its production binding (topic exchange, quorum queue bound to
 * {@code order.order.placed.v1}, dead-letter queue), under names unique to the test run.
 */
@SpringBootTest
@EnableIdempotencyTestKit(testBinder = false)
class ReserveStockOnRabbitIT {

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.";

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.topicExchange("events.reserve");

    private static final String QUEUE = rabbit.uniqueName("stock.events");

    static {
        // stock's dead-letter exchange, <group>.dlx: the broker's definitions declare it, not the service.
        rabbit.directExchange(QUEUE + ".dlx");
    }

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("stock").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> EXCHANGE);
        registry.add(BINDING + "group", () -> QUEUE);
        // stock.stock.reserved.v1 goes to the run's exchange too: the production one, events, is not on this broker.
        registry.add("idempotency.outbox.destination", () -> EXCHANGE);
    }

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    CachingConnectionFactory connectionFactory;

    @BeforeEach
    @AfterEach
    void reset() {
        this.recorder.reset();
        this.probe.reset();
    }

    @Test
    void theSameEnvelopePublishedTwiceToTheExchangeReservesStockOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        publish(order);
        publish(order);

        awaitAttempts(order, 2);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(1);
    }

    @Test
    void aRedeliveryAfterACommittedTransactionWhoseAckWasLostReservesStockOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(3);
        this.recorder.afterCommit(order.eventId(), this.connectionFactory::resetConnection);

        publish(order);

        List<Attempt> attempts = awaitAttempts(order, 2);
        assertThat(attempts.get(0).redelivered()).isFalse();
        assertThat(attempts.get(1).redelivered())
                .as("the broker redelivered the message whose ack was lost")
                .isTrue();
        assertThat(attempts).allSatisfy(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(3);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(1);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            a body that is not JSON             | hello                                               | NOT_JSON
            an empty body                       |                                                     | NOT_JSON
            JSON that is not an object          | ["order"]                                           | NOT_AN_OBJECT
            no event_id                         | {"event_name": "%2$s", "payload": %3$s}             | MISSING_EVENT_ID
            no event_name                       | {"event_id": "%1$s", "payload": %3$s}               | MISSING_FIELD
            no payload                          | {"event_id": "%1$s", "event_name": "%2$s"}          | MISSING_FIELD
            an event_id that is not a UUID      | {"event_id": "order-1", "event_name": "%2$s", "payload": %3$s} | INVALID_EVENT_ID
            an event_name not its routing key   | {"event_id": "%1$s", "event_name": "order.order.shipped.v1", "payload": %3$s} | ROUTE_MISMATCH
            a product id that is not a UUID     | {"event_id": "%1$s", "event_name": "%2$s", "payload": {"orderId": "%1$s", "lines": [{"productId": "p-1", "quantity": "1.000"}]}} | INVALID_PAYLOAD
            a quantity that is not a decimal    | {"event_id": "%1$s", "event_name": "%2$s", "payload": {"orderId": "%1$s", "lines": [{"productId": "%1$s", "quantity": "a lot"}]}} | INVALID_PAYLOAD
            a missing required field            | {"event_id": "%1$s", "event_name": "%2$s", "payload": {"lines": []}} | INVALID_PAYLOAD
            """)
    void aPoisonMessageGoesToTheDeadLetterQueueAfterOneAttemptWithItsReason(String kind, String body, String reason) {
        UUID eventId = UuidV7.generate();
        String payload = """
                {"orderId": "%s", "lines": [{"productId": "%s", "quantity": "1.000"}]}""".formatted(UuidV7.generate(), UUID.randomUUID());
        byte[] bytes = (body == null ? "" : body.formatted(eventId, Orders.PLACED, payload)).getBytes(UTF_8);

        rabbit.publish(EXCHANGE, Orders.PLACED, bytes, null);

        GetResponse deadLetter = awaitDeadLetter();
        assertThat(deadLetter.getBody()).isEqualTo(bytes);
        assertThat(deadLetter.getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith(reason + ": ");
        assertThat(this.recorder.attempts()).as("attempts, with three allowed").hasSize(1);
        assertThat(this.processedEvents.rows(eventId)).isZero();

        EventEnvelope<Map<String, Object>> next = Orders.placed(1);
        publish(next);
        awaitAttempts(next, 1);
        assertThat(Orders.reservations(this.jdbcTemplate, next)).isEqualTo(1);
    }

    /**
     * A publisher that may route events as order.order.placed.v1 cannot pass another event off under it with a header
     * the Kafka binder would set: only RabbitMQ's part reads a RabbitMQ message's route, from what the broker says.
     */
    @Test
    void aHeaderForgedForAnotherBinderDoesNotPassTheRouteCheck() {
        UUID eventId = UuidV7.generate();
        String forged = "order.order.shipped.v1";
        MessageProperties properties = new MessageProperties();
        properties.setContentType("application/json");
        properties.setHeader("kafka_receivedTopic", forged);
        byte[] body = """
                {"event_id": "%s", "event_name": "%s", "payload": {}}""".formatted(eventId, forged).getBytes(UTF_8);

        new RabbitTemplate(this.connectionFactory).send(EXCHANGE, Orders.PLACED, new Message(body, properties));

        GetResponse deadLetter = awaitDeadLetter();
        assertThat(deadLetter.getProps().getHeaders().get("x-exception-message"))
                .as("checked against the routing key the broker says, not the forged topic")
                .asString()
                .startsWith("ROUTE_MISMATCH: ");
        assertThat(this.processedEvents.rows(eventId)).isZero();
    }

    private GetResponse awaitDeadLetter() {
        AtomicReference<List<GetResponse>> deadLetters = new AtomicReference<>(List.of());
        await().atMost(Duration.ofSeconds(30))
                .until(() -> !deadLetters
                        .updateAndGet(none -> rabbit.drain(QUEUE + ".dlq"))
                        .isEmpty());
        assertThat(deadLetters.get()).hasSize(1);
        return deadLetters.get().get(0);
    }

    private void publish(EventEnvelope<?> event) {
        rabbit.publish(EXCHANGE, event);
    }

    private List<Attempt> awaitAttempts(EventEnvelope<?> event, int count) {
        await().atMost(Duration.ofSeconds(30))
                .until(() -> this.recorder.attempts(event.eventId()).size() >= count);
        return this.recorder.attempts(event.eventId());
    }
}
