package dev.exactlyonce.stock;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.IntStream;
import org.springframework.jdbc.core.JdbcTemplate;

/** {@code order.order.placed.v1} envelopes as the order service publishes them, every field included. */
final class Orders {

    static final String PLACED = "order.order.placed.v1";

    private Orders() {}

    static EventEnvelope<Map<String, Object>> placed(int lines) {
        Map<String, Object> payload = Map.of(
                "orderId", UuidV7.generate().toString(),
                "customerId", UUID.randomUUID().toString(),
                "version", 1,
                "currency", "EUR",
                "lines",
                        IntStream.rangeClosed(1, lines)
                                .mapToObj(line -> Map.of(
                                        "productId",
                                        UUID.randomUUID().toString(),
                                        "quantity",
                                        line + ".000",
                                        "unitPrice",
                                        "9.90"))
                                .toList());
        return new EventEnvelope<>(UuidV7.generate(), PLACED, Instant.now(), payload);
    }

    /** The reservations the order made in the service's database: one per line once applied, none before. */
    static int reservations(JdbcTemplate jdbcTemplate, EventEnvelope<Map<String, Object>> order) {
        Integer count = jdbcTemplate.queryForObject(
                "SELECT count(*) FROM reservation WHERE order_id = ?", Integer.class, orderId(order));
        return count != null ? count : 0;
    }

    static UUID orderId(EventEnvelope<Map<String, Object>> event) {
        return UUID.fromString((String) event.payload().get("orderId"));
    }

    @SuppressWarnings("unchecked")
    static int lineCount(EventEnvelope<Map<String, Object>> event) {
        return ((List<Object>) event.payload().get("lines")).size();
    }
}
