package dev.exactlyonce.shipping;

import java.util.function.Consumer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The shipping service. Its one binding, {@code idempotencyGuard|trackOrderStatus}, consumes {@code shipping.events}:
 * the order service's events and the stock service's {@code stock.stock.reserved.v1}. The guard discards duplicates,
 * and the versioned upsert discards an order event that arrives after a newer one.
 */
@SpringBootApplication
public class ShippingServiceApplication {

    private static final String UPSERT = """
            INSERT INTO order_status (order_id, status, version) VALUES (?, ?, ?)
            ON CONFLICT (order_id) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version
            WHERE order_status.version < EXCLUDED.version""";

    /** The same on MariaDB: the status first, while version is still the stored one, then the newer version. */
    private static final String UPSERT_MARIADB = """
            INSERT INTO order_status (order_id, status, version) VALUES (?, ?, ?)
            ON DUPLICATE KEY UPDATE status = IF(VALUES(version) > version, VALUES(status), status),
                                    version = GREATEST(version, VALUES(version))""";

    private static final String STOCK_RESERVED = """
            INSERT INTO order_stock (order_id, reservations) VALUES (?, ?)""";

    public static void main(String[] args) {
        SpringApplication application = new SpringApplication(ShippingServiceApplication.class);
        // The settings a deployment must give (shop.required-settings: the credentials, which have no default): Spring
        // refuses to start while one is missing, naming it, rather than logging in as a demo user or as guest.
        application.addInitializers(context -> context.getEnvironment()
                .setRequiredProperties(context.getEnvironment().getProperty("shop.required-settings", String[].class)));
        application.run(args);
    }

    /**
     * Keeps the newest status of each order (an event older than the stored version changes nothing), and records the
     * reservation of its stock: an order can leave once it is paid and its stock reserved ({@code order_ready}).
     */
    @Bean
    Consumer<ShippingEvent> trackOrderStatus(JdbcTemplate jdbcTemplate) {
        String upsert = Boolean.TRUE.equals(jdbcTemplate.execute((ConnectionCallback<Boolean>)
                        connection -> "MariaDB".equals(connection.getMetaData().getDatabaseProductName())))
                ? UPSERT_MARIADB
                : UPSERT;
        return event -> {
            if (event instanceof OrderEvent order) {
                jdbcTemplate.update(upsert, order.orderId(), order.status().name(), order.version());
            } else if (event instanceof ShippingEvent.StockReservedV1 reserved) {
                jdbcTemplate.update(STOCK_RESERVED, reserved.orderId(), reserved.reservations());
            }
        };
    }
}
