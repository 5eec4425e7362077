package dev.exactlyonce.billing;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Currency;
import java.util.UUID;

/**
 * The invoice of an order: the sum of quantity × unit price over its lines, computed exactly, then rounded once to the
 * currency's minor unit (half to even).
 *
 * @param id the invoice
 * @param orderId the order it bills
 * @param amount what the customer owes
 * @param currency the ISO 4217 code of the order's currency
 */
record Invoice(UUID id, UUID orderId, BigDecimal amount, String currency) {

    static Invoice of(OrderPlacedV1 order) {
        Currency currency = Currency.getInstance(order.currency());
        BigDecimal total = order.lines().stream()
                .map(line -> line.quantity().multiply(line.unitPrice()))
                .reduce(BigDecimal.ZERO, BigDecimal::add)
                .setScale(currency.getDefaultFractionDigits(), RoundingMode.HALF_EVEN);
        return new Invoice(UuidV7.generate(), order.orderId(), total, currency.getCurrencyCode());
    }
}
