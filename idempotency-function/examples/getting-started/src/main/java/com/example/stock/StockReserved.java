package com.example.stock;

import java.math.BigDecimal;
import java.util.UUID;

/** What this service emits once it reserved an order's stock: the payload of {@code stock.stock.reserved.v1}. */
public record StockReserved(UUID orderId, UUID productId, BigDecimal quantity) {

    public static final String NAME = "stock.stock.reserved.v1";
}
