package com.example.stock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** reserveStock behind the guard, on Spring Cloud Stream's test binder and a database of the test run's own. */
@SpringBootTest(properties = "spring.cloud.stream.default-binder=test")
@EnableIdempotencyTestKit
class ReserveStockTests {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("getting_started").registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void theSameEventDeliveredTwiceReservesOnceAndEmitsOnce() {
        EventEnvelope<OrderPlaced> event = orderPlaced();

        this.deliveries.deliver(event, 2);

        UUID orderId = event.payload().orderId();
        assertThat(count("SELECT count(*) FROM reservation WHERE order_id = ?", orderId))
                .isEqualTo(1);
        assertThat(count("SELECT count(*) FROM outbox_event WHERE aggregateid = ?", orderId.toString()))
                .isEqualTo(1);
    }

    static EventEnvelope<OrderPlaced> orderPlaced() {
        return new EventEnvelope<>(
                UuidV7.generate(),
                "order.order.placed.v1",
                Instant.now(),
                new OrderPlaced(UUID.randomUUID(), UUID.randomUUID(), new BigDecimal("2.000")));
    }

    private int count(String sql, Object argument) {
        return this.jdbcTemplate.queryForObject(sql, Integer.class, argument);
    }
}
