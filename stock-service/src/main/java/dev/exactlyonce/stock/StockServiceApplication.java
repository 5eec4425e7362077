package dev.exactlyonce.stock;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.util.Map;
import java.util.function.Consumer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The stock service. Its one binding, {@code idempotencyGuard|reserveStock}, consumes {@code stock.events}; the
 * guard lets each placed order through once, in the transaction of its reservations, and the order's
 * {@code stock.stock.reserved.v1} is written to the outbox in that transaction: published once it committed.
 */
@SpringBootApplication
public class StockServiceApplication {

    private static final String RESERVE = """
            INSERT INTO reservation (id, order_id, product_id, quantity) VALUES (?, ?, ?, ?)""";

    /** What the stock service emits once it reserved an order's lines. */
    static final String STOCK_RESERVED = "stock.stock.reserved.v1";

    public static void main(String[] args) {
        SpringApplication application = new SpringApplication(StockServiceApplication.class);
        // The settings a deployment must give (shop.required-settings: the credentials, which have no default): Spring
        // refuses to start while one is missing, naming it, rather than logging in as a demo user or as guest.
        application.addInitializers(context -> context.getEnvironment()
                .setRequiredProperties(context.getEnvironment().getProperty("shop.required-settings", String[].class)));
        application.run(args);
    }

    /**
     * Reserves each line of a placed order (one {@code reservation} row per line), and tells it:
     * {@code stock.stock.reserved.v1}, keyed by the order.
     */
    @Bean
    Consumer<OrderPlacedV1> reserveStock(JdbcTemplate jdbcTemplate, Outbox outbox) {
        return order -> {
            jdbcTemplate.batchUpdate(RESERVE, order.lines(), order.lines().size(), (statement, line) -> {
                statement.setObject(1, UuidV7.generate());
                statement.setObject(2, order.orderId());
                statement.setObject(3, line.productId());
                statement.setBigDecimal(4, line.quantity());
            });
            outbox.emit(
                    STOCK_RESERVED,
                    order.orderId().toString(),
                    Map.of(
                            "orderId",
                            order.orderId(),
                            "reservations",
                            order.lines().size()));
        };
    }
}
