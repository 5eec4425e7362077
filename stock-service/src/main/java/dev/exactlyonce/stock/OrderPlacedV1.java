package dev.exactlyonce.stock;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.math.BigDecimal;
import java.util.List;
import java.util.UUID;

/**
 * The fields of {@code order.order.placed.v1} the stock service reads; the others are ignored.
 *
 * @param orderId the order
 * @param lines the order's lines
 */
@EventName("order.order.placed.v1")
public record OrderPlacedV1(UUID orderId, List<Line> lines) {

    /**
     * A line of the order.
     *
     * @param productId the product
     * @param quantity how much of it, an exact decimal such as {@code 2.000}
     */
    public record Line(UUID productId, BigDecimal quantity) {}
}
