package dev.exactlyonce.billing;

import java.math.BigDecimal;
import java.util.Map;
import org.springframework.web.client.RestClient;

/**
 * Asks the payment provider to charge an amount. The {@code Idempotency-Key} makes a repeated request (a retry after
 * a failed commit, a duplicate the guard let through because its first copy rolled back) charge once: the provider
 * answers it with the first answer.
 */
final class PaymentProviderClient {

    private final RestClient restClient;

    PaymentProviderClient(RestClient restClient) {
        this.restClient = restClient;
    }

    /** What the provider answered. */
    record Charge(String id, BigDecimal amount, String currency, String status) {}

    Charge charge(String idempotencyKey, Invoice invoice) {
        Charge charge = this.restClient
                .post()
                .uri("/v1/charges")
                .header("Idempotency-Key", idempotencyKey)
                .body(Map.of(
                        "amount", invoice.amount().toPlainString(),
                        "currency", invoice.currency(),
                        "reference", invoice.orderId().toString()))
                .retrieve()
                .body(Charge.class);
        if (charge == null) {
            throw new IllegalStateException("The payment provider answered without a charge");
        }
        return charge;
    }
}
