package dev.exactlyonce.shipping;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.util.UUID;

/**
 * The order events the shipping service reads: each one sets the order's status as of a version of the order. The
 * guard picks the record by the envelope's event name.
 */
public sealed interface OrderEvent extends ShippingEvent {

    /** The order's status as of this event. */
    OrderStatus status();

    /** The order's version, incremented on every change of the order. */
    long version();

    /**
     * {@code order.order.placed.v1}, of which shipping reads the order and its first version.
     *
     * @param orderId the order
     * @param version the order's version, 1
     */
    @EventName("order.order.placed.v1")
    record OrderPlacedV1(UUID orderId, long version) implements OrderEvent {

        @Override
        public OrderStatus status() {
            return OrderStatus.PLACED;
        }
    }

    /**
     * {@code order.order.status-changed.v1}.
     *
     * @param orderId the order
     * @param status its new status
     * @param version the order's version after the change
     */
    @EventName("order.order.status-changed.v1")
    record OrderStatusChangedV1(UUID orderId, OrderStatus status, long version) implements OrderEvent {}
}
