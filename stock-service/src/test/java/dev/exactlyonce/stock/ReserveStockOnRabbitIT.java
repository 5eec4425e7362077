package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
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

    private static final String EXCHANGE = rabbit.uniqueName("events");

    private static final String QUEUE = rabbit.uniqueName("stock.events");

    private static final Connection publisher = rabbit.newConnection();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("stock").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> EXCHANGE);
        registry.add(BINDING + "group", () -> QUEUE);
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

    private final EnvelopeCodec codec = new EnvelopeCodec();

    @AfterEach
    void reset() {
        this.recorder.reset();
        this.probe.reset();
    }

    @AfterAll
    static void closePublisher() throws Exception {
        publisher.close();
    }

    @Test
    void theSameEnvelopePublishedTwiceToTheExchangeReservesStockOnce() throws Exception {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        publish(order);
        publish(order);

        awaitAttempts(order, 2);
        assertThat(reservations(order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(1);
    }

    @Test
    void aRedeliveryAfterACommittedTransactionWhoseAckWasLostReservesStockOnce() throws Exception {
        EventEnvelope<Map<String, Object>> order = Orders.placed(3);
        this.recorder.afterCommit(order.eventId(), this.connectionFactory::resetConnection);

        publish(order);

        List<Attempt> attempts = awaitAttempts(order, 2);
        assertThat(attempts.get(0).redelivered()).isFalse();
        assertThat(attempts.get(1).redelivered())
                .as("the broker redelivered the message whose ack was lost")
                .isTrue();
        assertThat(attempts).allSatisfy(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(reservations(order)).isEqualTo(3);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(1);
    }

    private void publish(EventEnvelope<?> event) throws Exception {
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .messageId(event.eventId().toString())
                .deliveryMode(2)
                .build();
        try (Channel channel = publisher.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish(EXCHANGE, event.eventName(), properties, this.codec.encode(event));
            channel.waitForConfirmsOrDie(5_000);
        }
    }

    private List<Attempt> awaitAttempts(EventEnvelope<?> event, int count) {
        await().atMost(Duration.ofSeconds(30))
                .until(() -> this.recorder.attempts(event.eventId()).size() >= count);
        return this.recorder.attempts(event.eventId());
    }

    private int reservations(EventEnvelope<Map<String, Object>> order) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM reservation WHERE order_id = ?", Integer.class, Orders.orderId(order));
        return count != null ? count : 0;
    }
}
