package com.example.stock;

import dev.exactlyonce.idempotency.OutgoingEvent;
import java.util.function.Function;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Reserves stock once per order placed, however many copies of the event arrive, and tells the others through the
 * outbox: {@code spring.cloud.function.definition: idempotencyGuard|reserveStock} (application.yml) runs the function
 * in the transaction of the event's claim, and what it returns is published once that transaction committed.
 */
@SpringBootApplication
public class StockApplication {

    public static void main(String[] args) {
        SpringApplication.run(StockApplication.class, args);
    }

    @Bean
    Function<OrderPlaced, OutgoingEvent> reserveStock(JdbcTemplate jdbcTemplate) {
        return order -> {
            jdbcTemplate.update(
                    "INSERT INTO reservation (order_id, product_id, quantity) VALUES (?, ?, ?)",
                    order.orderId(),
                    order.productId(),
                    order.quantity());
            return new OutgoingEvent(
                    StockReserved.NAME,
                    order.orderId().toString(),
                    new StockReserved(order.orderId(), order.productId(), order.quantity()));
        };
    }
}
