package dev.exactlyonce.shipping;

/** The statuses of an order, as the order service publishes them. */
public enum OrderStatus {
    PLACED,
    PAID,
    READY_TO_SHIP,
    CANCELLED
}
