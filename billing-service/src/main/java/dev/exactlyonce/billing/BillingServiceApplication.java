package dev.exactlyonce.billing;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;

/**
 * The billing service. Its one binding, {@code idempotencyGuard|invoiceOrder}, consumes {@code billing.events}: once
 * per placed order it writes the invoice and charges it at the payment provider. The charge is an effect outside the
 * database, which a rollback cannot undo; it carries its own idempotency key, derived from the event id, so that
 * charging again on a retry charges once. The provider forgets keys after a while
 * ({@code billing.payment-provider.key-lifetime}): for an event old enough that the key of its first attempt may be
 * forgotten (a replay, a long stay in the dead-letter queue), the charge is looked up by the order's reference first.
 */
@SpringBootApplication
public class BillingServiceApplication {

    private static final String INSERT_INVOICE = """
            INSERT INTO invoice (id, order_id, amount, currency) VALUES (?, ?, ?, ?)""";

    private static final String INSERT_PAYMENT = """
            INSERT INTO payment (invoice_id, idempotency_key, provider_charge_id, amount, currency, status)
            VALUES (?, ?, ?, ?, ?, ?)""";

    public static void main(String[] args) {
        SpringApplication application = new SpringApplication(BillingServiceApplication.class);
        // The settings a deployment must give (shop.required-settings: the credentials, which have no default): Spring
        // refuses to start while one is missing, naming it, rather than logging in as a demo user or as guest.
        application.addInitializers(context -> context.getEnvironment()
                .setRequiredProperties(context.getEnvironment().getProperty("shop.required-settings", String[].class)));
        application.run(args);
    }

    /** The key of the charge for an event: the same on every delivery and every retry of that event. */
    static String idempotencyKey(UUID eventId) {
        return "billing-charge-" + eventId;
    }

    /**
     * Whether the provider may have forgotten the key of the event's first attempt: that attempt came after the event
     * occurred, so the key is surely remembered while the event is younger than the key lifetime. Half of it leaves
     * room for the producer's and the provider's clocks to differ.
     */
    static boolean keyMayBeForgotten(@Nullable Instant occurredAt, Duration keyLifetime) {
        return occurredAt == null || !occurredAt.plus(keyLifetime.dividedBy(2)).isAfter(Instant.now());
    }

    /** Invoices a placed order and charges the invoice, in the transaction of the message. */
    @Bean
    Consumer<Message<OrderPlacedV1>> invoiceOrder(
            JdbcTemplate jdbcTemplate,
            PaymentProviderClient paymentProvider,
            @Value("${billing.payment-provider.key-lifetime:24h}") Duration keyLifetime) {
        return message -> {
            Invoice invoice = Invoice.of(message.getPayload());
            jdbcTemplate.update(INSERT_INVOICE, invoice.id(), invoice.orderId(), invoice.amount(), invoice.currency());
            String key = idempotencyKey(message.getHeaders().get(EventHeaders.EVENT_ID, UUID.class));
            Instant occurredAt = message.getHeaders().get(EventHeaders.OCCURRED_AT, Instant.class);
            PaymentProviderClient.Charge charge = keyMayBeForgotten(occurredAt, keyLifetime)
                    ? paymentProvider
                            .existingCharge(invoice.orderId())
                            .orElseGet(() -> paymentProvider.charge(key, invoice))
                    : paymentProvider.charge(key, invoice);
            jdbcTemplate.update(
                    INSERT_PAYMENT,
                    invoice.id(),
                    key,
                    charge.id(),
                    charge.amount(),
                    charge.currency(),
                    charge.status());
        };
    }
}
