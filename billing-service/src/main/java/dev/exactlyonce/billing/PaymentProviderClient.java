package dev.exactlyonce.billing;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.client.HttpClientErrorException;
import org.springframework.web.client.RestClient;

/**
 * Asks the payment provider to charge an amount, as real providers expect to be asked:
 *
 * <ul>
 *   <li>the {@code Idempotency-Key} makes a repeated request (a retry after a failed commit, a duplicate the guard let
 *       through because its first copy rolled back) charge once: the provider answers it with the first answer;
 *   <li>a {@code 409} means a request with the same key is still being processed (an earlier attempt that timed out
 *       on our side): the request is repeated with back-off until that one is done, and gets its answer;
 *   <li>any other {@code 4xx} refuses the charge for what it asks ({@link ChargeRefusedException}): asking again
 *       would be refused again;
 *   <li>a key is only remembered for a while (Stripe: 24 hours); {@link #existingCharge(UUID)} finds a charge by the
 *       order's reference, for a retry that may come after the key expired.
 * </ul>
 */
final class PaymentProviderClient {

    private static final Logger logger = LoggerFactory.getLogger(PaymentProviderClient.class);

    private static final Duration FIRST_BACK_OFF = Duration.ofMillis(100);

    private static final Duration MAX_BACK_OFF = Duration.ofSeconds(2);

    private final RestClient restClient;

    private final Duration inFlightWait;

    PaymentProviderClient(RestClient restClient, Duration inFlightWait) {
        this.restClient = restClient;
        this.inFlightWait = inFlightWait;
    }

    /** What the provider answered. */
    record Charge(String id, BigDecimal amount, String currency, String status) {}

    private record Charges(List<Charge> charges) {}

    Charge charge(String idempotencyKey, Invoice invoice) {
        long deadline = System.nanoTime() + this.inFlightWait.toNanos();
        Duration backOff = FIRST_BACK_OFF;
        while (true) {
            try {
                return request(idempotencyKey, invoice);
            } catch (HttpClientErrorException.Conflict ex) {
                if (System.nanoTime() + backOff.toNanos() > deadline) {
                    throw new IllegalStateException(
                            ("The payment provider still processes the request with key %s"
                                            + " after %s (409); the message is retried")
                                    .formatted(idempotencyKey, this.inFlightWait),
                            ex);
                }
                logger.debug("Key {} is in flight at the provider; asking again in {}", idempotencyKey, backOff);
                sleep(backOff);
                backOff = backOff.multipliedBy(2).compareTo(MAX_BACK_OFF) > 0 ? MAX_BACK_OFF : backOff.multipliedBy(2);
            }
        }
    }

    /** The succeeded charge of the order, if the provider made one. */
    Optional<Charge> existingCharge(UUID orderId) {
        Charges found = this.restClient
                .get()
                .uri("/v1/charges?reference={reference}", orderId)
                .retrieve()
                .body(Charges.class);
        return found == null
                ? Optional.empty()
                : found.charges().stream()
                        .filter(charge -> "succeeded".equals(charge.status()))
                        .findFirst();
    }

    private Charge request(String idempotencyKey, Invoice invoice) {
        Charge charge;
        try {
            charge = this.restClient
                    .post()
                    .uri("/v1/charges")
                    .header("Idempotency-Key", idempotencyKey)
                    .body(Map.of(
                            "amount", invoice.amount().toPlainString(),
                            "currency", invoice.currency(),
                            "reference", invoice.orderId().toString()))
                    .retrieve()
                    .body(Charge.class);
        } catch (HttpClientErrorException ex) {
            if (ex instanceof HttpClientErrorException.Conflict
                    || ex instanceof HttpClientErrorException.TooManyRequests) {
                throw ex;
            }
            throw new ChargeRefusedException(ex.getStatusCode().value(), idempotencyKey);
        }
        if (charge == null) {
            throw new IllegalStateException("The payment provider answered without a charge");
        }
        return charge;
    }

    private static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while waiting for the payment provider", ex);
        }
    }
}
