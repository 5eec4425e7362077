package dev.exactlyonce.infra.shop;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.outbox.Outbox;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import java.util.function.UnaryOperator;
import org.springframework.boot.Banner;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.Lifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Plays the order service: a Spring Boot service of its own, in the scenario's process, that writes each order, and
 * each change of its status, together with the event that tells it, in one transaction of its own database, through
 * the library's {@link Outbox} (the event id, a UUID v7, is set there, once). The library's outbox relay publishes the
 * events once committed, in order per order, once the broker has them: on RabbitMQ to the run's exchange, on Kafka to
 * the topic of each event.
 */
public final class OrderService implements AutoCloseable {

    static final String PLACED = "order.order.placed.v1";

    static final String STATUS_CHANGED = "order.order.status-changed.v1";

    private static final String[] STATUSES = {"PAID", "READY_TO_SHIP", "CANCELLED"};

    /** The order service: its tables, the library's outbox and relay, a meter registry; no function is bound. */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class Application {

        @Bean
        SimpleMeterRegistry orderServiceMeters() {
            return new SimpleMeterRegistry();
        }
    }

    private final ConfigurableApplicationContext context;

    private final JdbcTemplate jdbc;

    private final TransactionTemplate transactions;

    private final Outbox outbox;

    private final MeterRegistry meters;

    private final Random random;

    private final UnaryOperator<String> destinations;

    private OrderService(ConfigurableApplicationContext context, UnaryOperator<String> destinations, long seed) {
        this.context = context;
        this.jdbc = context.getBean(JdbcTemplate.class);
        this.transactions = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
        this.outbox = context.getBean(Outbox.class);
        this.meters = context.getBean(MeterRegistry.class);
        this.random = new Random(seed);
        this.destinations = destinations;
    }

    /**
     * Starts the order service on an empty database, which it gives its tables and the library's.
     *
     * @param schema the scripts of those tables, in the database's SQL ({@code spring.sql.init.schema-locations})
     * @param properties its settings ({@code name=value}): the database, the binder, the broker and its user
     * @param destinations the destination of each event name: RabbitMQ's exchange, Kafka's topic of the event
     * @param seed what the orders are drawn from
     */
    public static OrderService start(
            String schema, List<String> properties, UnaryOperator<String> destinations, long seed) {
        List<String> arguments = new ArrayList<>(List.of(
                "spring.sql.init.mode=always",
                "spring.sql.init.schema-locations=" + schema,
                // It binds no function: the relay's output is its only binding.
                "spring.cloud.stream.function.autodetect=false",
                "spring.application.name=order-service"));
        arguments.addAll(properties);
        ConfigurableApplicationContext context = new SpringApplicationBuilder(Application.class)
                .web(WebApplicationType.NONE)
                .bannerMode(Banner.Mode.OFF)
                .logStartupInfo(false)
                .run(arguments.stream().map(property -> "--" + property).toArray(String[]::new));
        return new OrderService(context, destinations, seed);
    }

    /** A placed order: what the services must make of it. */
    public record PlacedOrder(UUID orderId, int lines, BigDecimal amount) {}

    /** Places an order of one to three lines, in euros; writes it and its event in one transaction. */
    public PlacedOrder placeOrder() {
        UUID orderId = UuidV7.generate();
        UUID customerId = UUID.randomUUID();
        int count = 1 + this.random.nextInt(3);
        List<Map<String, Object>> lines = new ArrayList<>();
        BigDecimal amount = BigDecimal.ZERO;
        for (int line = 1; line <= count; line++) {
            BigDecimal quantity =
                    BigDecimal.valueOf(1 + this.random.nextInt(5), 0).setScale(3);
            BigDecimal unitPrice = BigDecimal.valueOf(100 + this.random.nextInt(9_900), 2);
            amount = amount.add(quantity.multiply(unitPrice));
            lines.add(Map.of(
                    "productId", UUID.randomUUID().toString(),
                    "quantity", quantity.toPlainString(),
                    "unitPrice", unitPrice.toPlainString()));
        }
        Map<String, Object> payload = new LinkedHashMap<>();
        payload.put("orderId", orderId.toString());
        payload.put("customerId", customerId.toString());
        payload.put("version", 1);
        payload.put("currency", "EUR");
        payload.put("lines", lines);
        this.transactions.executeWithoutResult(status -> {
            this.jdbc.update(
                    "INSERT INTO orders (id, customer_id, currency, status, version) VALUES (?, ?, 'EUR', 'PLACED', 1)",
                    orderId,
                    customerId);
            for (int line = 0; line < lines.size(); line++) {
                this.jdbc.update(
                        "INSERT INTO order_line (order_id, line, product_id, quantity, unit_price)"
                                + " VALUES (?, ?, ?, ?, ?)",
                        orderId,
                        line + 1,
                        UUID.fromString((String) lines.get(line).get("productId")),
                        new BigDecimal((String) lines.get(line).get("quantity")),
                        new BigDecimal((String) lines.get(line).get("unitPrice")));
            }
            emit(new OutgoingEvent(PLACED, orderId.toString(), payload));
        });
        return new PlacedOrder(orderId, count, amount.setScale(2, RoundingMode.HALF_EVEN));
    }

    /**
     * Moves the order to its next status (paid, ready to ship, cancelled), incrementing its version, with the event in
     * the same transaction.
     */
    public void advance(UUID orderId) {
        this.transactions.executeWithoutResult(status -> {
            // The row stays locked from the update to the commit: the version read is this transaction's.
            this.jdbc.update("UPDATE orders SET version = version + 1 WHERE id = ?", orderId);
            long version = this.jdbc.queryForObject("SELECT version FROM orders WHERE id = ?", Long.class, orderId);
            String next = STATUSES[(int) Math.min(version - 2, STATUSES.length - 1)];
            this.jdbc.update("UPDATE orders SET status = ? WHERE id = ?", next, orderId);
            emit(new OutgoingEvent(
                    STATUS_CHANGED,
                    orderId.toString(),
                    Map.of("orderId", orderId.toString(), "status", next, "version", version)));
        });
    }

    private void emit(OutgoingEvent event) {
        this.outbox.write(this.destinations.apply(event.name()), List.of(event));
    }

    /**
     * Holds the relay back (its thread stops; what commits meanwhile waits in the outbox), or lets it go on, as a
     * deployment stopping and starting the service's relay would.
     */
    public void holdRelay(boolean held) {
        Lifecycle relay = this.context.getBean("idempotencyOutboxRelay", Lifecycle.class);
        if (held) {
            relay.stop();
        } else {
            relay.start();
        }
    }

    /** Publishes again, with their ids, the events written in the period ({@link Outbox#republish}); how many. */
    public int republish(Instant from, Instant to) {
        return this.outbox.republish(from, to);
    }

    /** The status and version each order has now, as the shipping service must end up copying it. */
    public Map<UUID, String> statuses() {
        Map<UUID, String> statuses = new LinkedHashMap<>();
        this.jdbc.query("SELECT id, status, version FROM orders", row -> {
            statuses.put(row.getObject(1, UUID.class), row.getString(2) + "@" + row.getLong(3));
        });
        return statuses;
    }

    /** How many events the order service has written. */
    public int events() {
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox_event", Integer.class);
    }

    /** How many events its relay has not published yet. */
    public int unpublished() {
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class);
    }

    /** How many messages its relay has published, copies included (the broker confirmed them). */
    public int published() {
        return (int) this.meters.counter("idempotency.outbox.published").count();
    }

    @Override
    public void close() {
        this.context.close();
    }
}
