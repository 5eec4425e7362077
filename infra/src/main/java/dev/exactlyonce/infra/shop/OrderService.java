package dev.exactlyonce.infra.shop;

import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import javax.sql.DataSource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Plays the order service: it writes each order, and each change of its status, together with the event that tells
 * it, in one transaction of its own database: the outbox row, whose event id (a UUID v7) is set here, once.
 */
public final class OrderService {

    static final String PLACED = "order.order.placed.v1";

    static final String STATUS_CHANGED = "order.order.status-changed.v1";

    private static final String SCHEMA = """
            CREATE TABLE IF NOT EXISTS orders (
                id          uuid        PRIMARY KEY,
                customer_id uuid        NOT NULL,
                currency    char(3)     NOT NULL,
                status      text        NOT NULL,
                version     bigint      NOT NULL,
                created_at  timestamptz NOT NULL DEFAULT now()
            );
            CREATE TABLE IF NOT EXISTS order_line (
                order_id   uuid           NOT NULL REFERENCES orders (id),
                line       int            NOT NULL,
                product_id uuid           NOT NULL,
                quantity   numeric(12, 3) NOT NULL,
                unit_price numeric(12, 2) NOT NULL,
                PRIMARY KEY (order_id, line)
            );
            CREATE TABLE IF NOT EXISTS outbox (
                id           bigserial   PRIMARY KEY,
                event_id     uuid        NOT NULL UNIQUE,
                event_name   text        NOT NULL,
                body         bytea       NOT NULL,
                created_at   timestamptz NOT NULL DEFAULT now(),
                published_at timestamptz
            );
            CREATE INDEX IF NOT EXISTS outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL""";

    private static final String[] STATUSES = {"PAID", "READY_TO_SHIP", "CANCELLED"};

    private final JdbcTemplate jdbc;

    private final TransactionTemplate transactions;

    private final EnvelopeCodec codec = new EnvelopeCodec();

    private final Random random;

    public OrderService(DataSource dataSource, long seed) {
        this.jdbc = new JdbcTemplate(dataSource);
        this.transactions = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
        this.random = new Random(seed);
        this.jdbc.execute(SCHEMA);
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
                                + " VALUES (?, ?, ?::uuid, ?, ?)",
                        orderId,
                        line + 1,
                        lines.get(line).get("productId"),
                        new BigDecimal((String) lines.get(line).get("quantity")),
                        new BigDecimal((String) lines.get(line).get("unitPrice")));
            }
            outbox(PLACED, payload);
        });
        return new PlacedOrder(orderId, count, amount.setScale(2, RoundingMode.HALF_EVEN));
    }

    /**
     * Moves the order to its next status (paid, ready to ship, cancelled), incrementing its version, with the event in
     * the same transaction.
     */
    public void advance(UUID orderId) {
        this.transactions.executeWithoutResult(status -> {
            long version = this.jdbc.queryForObject(
                    "UPDATE orders SET version = version + 1 WHERE id = ? RETURNING version", Long.class, orderId);
            String next = STATUSES[(int) Math.min(version - 2, STATUSES.length - 1)];
            this.jdbc.update("UPDATE orders SET status = ? WHERE id = ?", next, orderId);
            outbox(STATUS_CHANGED, Map.of("orderId", orderId.toString(), "status", next, "version", version));
        });
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
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox", Integer.class);
    }

    private void outbox(String eventName, Map<String, Object> payload) {
        EventEnvelope<Map<String, Object>> event =
                new EventEnvelope<>(UuidV7.generate(), eventName, Instant.now(), payload);
        this.jdbc.update(
                "INSERT INTO outbox (event_id, event_name, body) VALUES (?, ?, ?)",
                event.eventId(),
                eventName,
                this.codec.encode(event));
    }
}
