package dev.exactlyonce.shipping;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/** Order events as the order service publishes them, every field included. */
final class ShopEvents {

    static final String PLACED = "order.order.placed.v1";

    static final String STATUS_CHANGED = "order.order.status-changed.v1";

    static final String STOCK_RESERVED = "stock.stock.reserved.v1";

    private ShopEvents() {}

    static EventEnvelope<Map<String, Object>> placed(UUID orderId) {
        return new EventEnvelope<>(
                UuidV7.generate(),
                PLACED,
                Instant.now(),
                Map.of(
                        "orderId", orderId.toString(),
                        "customerId", UUID.randomUUID().toString(),
                        "version", 1,
                        "currency", "EUR",
                        "lines",
                                List.of(Map.of(
                                        "productId", UUID.randomUUID().toString(),
                                        "quantity", "1.000",
                                        "unitPrice", "3.50"))));
    }

    /** As the stock service emits it through its outbox. */
    static EventEnvelope<Map<String, Object>> stockReserved(UUID orderId, int reservations) {
        return new EventEnvelope<>(
                UuidV7.generate(),
                STOCK_RESERVED,
                Instant.now(),
                Map.of("orderId", orderId.toString(), "reservations", reservations));
    }

    static EventEnvelope<Map<String, Object>> statusChanged(UUID orderId, String status, long version) {
        return new EventEnvelope<>(
                UuidV7.generate(),
                STATUS_CHANGED,
                Instant.now(),
                Map.of("orderId", orderId.toString(), "status", status, "version", version));
    }
}
