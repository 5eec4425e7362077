package dev.exactlyonce.stock;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.util.function.Consumer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The stock service. Its one binding, {@code idempotencyGuard|reserveStock}, consumes {@code stock.events}; the
 * guard lets each placed order through once, in the transaction of its reservations.
 */
@SpringBootApplication
public class StockServiceApplication {

    private static final String RESERVE = """
            INSERT INTO reservation (id, order_id, product_id, quantity) VALUES (?, ?, ?, ?)""";

    public static void main(String[] args) {
        SpringApplication.run(StockServiceApplication.class, args);
    }

    /** Reserves each line of a placed order: one {@code reservation} row per line. */
    @Bean
    Consumer<OrderPlacedV1> reserveStock(JdbcTemplate jdbcTemplate) {
        return order ->
                jdbcTemplate.batchUpdate(RESERVE, order.lines(), order.lines().size(), (statement, line) -> {
                    statement.setObject(1, UuidV7.generate());
                    statement.setObject(2, order.orderId());
                    statement.setObject(3, line.productId());
                    statement.setBigDecimal(4, line.quantity());
                });
    }
}
