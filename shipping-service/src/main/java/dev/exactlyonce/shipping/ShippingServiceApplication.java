package dev.exactlyonce.shipping;

import java.util.function.Consumer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The shipping service. Its one binding, {@code idempotencyGuard|trackOrderStatus}, consumes {@code shipping.events};
 * the guard discards duplicates, and the versioned upsert discards an event that arrives after a newer one.
 */
@SpringBootApplication
public class ShippingServiceApplication {

    private static final String UPSERT = """
            INSERT INTO order_status (order_id, status, version) VALUES (?, ?, ?)
            ON CONFLICT (order_id) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version
            WHERE order_status.version < EXCLUDED.version""";

    public static void main(String[] args) {
        SpringApplication.run(ShippingServiceApplication.class, args);
    }

    /** Keeps the newest status of each order: an event older than the stored version changes nothing. */
    @Bean
    Consumer<OrderEvent> trackOrderStatus(JdbcTemplate jdbcTemplate) {
        return event ->
                jdbcTemplate.update(UPSERT, event.orderId(), event.status().name(), event.version());
    }
}
