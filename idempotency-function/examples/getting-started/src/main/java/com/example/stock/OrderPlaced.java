package com.example.stock;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.math.BigDecimal;
import java.util.UUID;

/** The payload of the order service's event: every component is required; decimals map exactly. */
@EventName("order.order.placed.v1")
public record OrderPlaced(UUID orderId, UUID productId, BigDecimal quantity) {}
