package dev.exactlyonce.shipping;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.util.UUID;

/**
 * The events the shipping service reads: the order service's, which set an order's status, and the stock service's
 * reservation of an order's lines. The guard picks the record by the envelope's event name.
 */
public sealed interface ShippingEvent permits OrderEvent, ShippingEvent.StockReservedV1 {

    /** The order. */
    UUID orderId();

    /**
     * {@code stock.stock.reserved.v1}: the stock service reserved every line of the order, once.
     *
     * @param orderId the order
     * @param reservations how many lines it reserved
     */
    @EventName("stock.stock.reserved.v1")
    record StockReservedV1(UUID orderId, int reservations) implements ShippingEvent {}
}
