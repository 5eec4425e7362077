package com.example.stock;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The service as it is configured, on a real RabbitMQ and PostgreSQL: the same order published twice is reserved once,
 * and its reservation published once, after the commit. Exchanges and queues are named uniquely for the test run.
 */
@SpringBootTest
@EnableIdempotencyTestKit(testBinder = false)
class ReserveStockOnRabbitIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String ORDERS = rabbit.uniqueName("orders");

    private static final String EVENTS = rabbit.topicExchange("events");

    /** A queue of the test's own on the exchange where the relay publishes, bound with the reservation's name. */
    private static final String RESERVED = rabbit.deleteAtExit(rabbit.uniqueName("reserved"));

    private static final String BINDINGS = "spring.cloud.stream.bindings.idempotencyGuardreserveStock-";

    private static final String PUBLISHED =
            "SELECT count(*) FROM outbox_event WHERE aggregateid = ? AND published_at IS NOT NULL";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("getting_started").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDINGS + "in-0.destination", () -> ORDERS);
        registry.add(BINDINGS + "out-0.destination", () -> EVENTS);
        rabbit.deleteAtExit(ORDERS + ".stock");
    }

    @BeforeAll
    static void listenToTheReservations() throws Exception {
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueDeclare(RESERVED, true, false, false, null);
            channel.queueBind(RESERVED, EVENTS, StockReserved.NAME);
        }
    }

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void theSameOrderPublishedTwiceIsReservedOnceAndItsReservationPublishedOnce() {
        EventEnvelope<OrderPlaced> event = ReserveStockTests.orderPlaced();
        String orderId = event.payload().orderId().toString();

        rabbit.publish(ORDERS, event);
        rabbit.publish(ORDERS, event);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.recorder.attempts(event.eventId()))
                        .hasSize(2));
        await().atMost(Duration.ofSeconds(30))
                .until(() -> count(PUBLISHED, orderId) == 1);
        assertThat(count("SELECT count(*) FROM reservation WHERE order_id = ?::uuid", orderId))
                .isEqualTo(1);
        assertThat(rabbit.drain(RESERVED)).singleElement().satisfies(message -> assertThat(
                        new String(message.getBody(), UTF_8))
                .contains("\"event_name\":\"" + StockReserved.NAME + "\"")
                .contains(orderId));
    }

    private int count(String sql, String argument) {
        return this.jdbcTemplate.queryForObject(sql, Integer.class, argument);
    }
}
