package dev.exactlyonce.billing;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.math.BigDecimal;
import java.util.List;
import java.util.UUID;

/**
 * The fields of {@code order.order.placed.v1} the billing service reads.
 *
 * @param orderId the order
 * @param currency the ISO 4217 code of the order's currency
 * @param lines the order's lines
 */
@EventName("order.order.placed.v1")
public record OrderPlacedV1(UUID orderId, String currency, List<Line> lines) {

    /**
     * A line of the order.
     *
     * @param quantity how much, an exact decimal such as {@code 2.000}
     * @param unitPrice the price of one unit, an exact decimal
     */
    public record Line(BigDecimal quantity, BigDecimal unitPrice) {}
}
