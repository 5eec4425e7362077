package dev.exactlyonce.billing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.paymentprovider.PaymentProvider;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * invoiceOrder behind the guard, on the test binder, a real PostgreSQL and a real HTTP payment provider that honours
 * idempotency keys. Three attempts, with a short back-off.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.default-binder=test",
            "spring.cloud.stream.bindings.idempotencyGuardinvoiceOrder-in-0.consumer.back-off-initial-interval=1",
            "spring.cloud.stream.bindings.idempotencyGuardinvoiceOrder-in-0.consumer.back-off-max-interval=1",
            "billing.payment-provider.timeout=1s",
            "billing.payment-provider.plain-http-allowed=true",
            "billing.payment-provider.key-lifetime=1h"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
class InvoiceOrderTests {

    private static final String FUNCTION = "invoiceOrder";

    private static final PaymentProvider provider = PaymentProvider.start(0);

    /** Between the service and the provider, to take the provider away. */
    private static final TcpProxy providerLink = TcpProxy.to("127.0.0.1", provider.port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("billing").registerDataSource(registry);
        registry.add("billing.payment-provider.url", () -> "http://127.0.0.1:" + providerLink.port());
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @AfterEach
    void reset() {
        this.probe.reset();
        this.deliveries.resetLastError();
        provider.keyLifetime(PaymentProvider.DEFAULT_KEY_LIFETIME);
        provider.processingTime(Duration.ZERO);
    }

    @AfterAll
    static void stopProvider() {
        providerLink.close();
        provider.close();
    }

    @Test
    void invoicesTheExactSumOfTheLinesInTheOrdersCurrencyAndChargesIt() {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("2.000", "9.99"), line("1.500", "3.10"));
        int chargesBefore = provider.chargeCount();

        this.deliveries.deliver(order);

        assertThat(invoice(order)).isEqualTo(Map.of("amount", new BigDecimal("24.6300"), "currency", "EUR"));
        assertThat(provider.chargeCount()).isEqualTo(chargesBefore + 1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT p.idempotency_key FROM payment p JOIN invoice i ON i.id = p.invoice_id"
                                + " WHERE i.order_id = ?",
                        String.class,
                        orderId(order)))
                .isEqualTo("billing-charge-" + order.eventId());
    }

    @Test
    void roundsTheTotalOnceToTheCurrencysMinorUnit() {
        EventEnvelope<Map<String, Object>> yen = order("JPY", line("3.000", "33.335"));
        EventEnvelope<Map<String, Object>> euros = order("EUR", line("0.333", "1.99"), line("0.333", "1.99"));

        this.deliveries.deliver(yen);
        this.deliveries.deliver(euros);

        assertThat(invoice(yen)).containsEntry("amount", new BigDecimal("100.0000"));
        assertThat(invoice(euros)).containsEntry("amount", new BigDecimal("1.3300"));
    }

    @Test
    void deliveringTheSameEventTwiceInvoicesAndChargesOnce() {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("1.000", "5.00"));
        int chargesBefore = provider.chargeCount();

        this.deliveries.deliver(order, 2);

        assertThat(invoices(order)).isEqualTo(1);
        assertThat(provider.chargeCount()).isEqualTo(chargesBefore + 1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
    }

    @Test
    void aFailureAfterTheChargeAndBeforeTheCommitIsRetriedIntoOneInvoiceAndOneCharge() {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("1.000", "7.50"));
        int chargesBefore = provider.chargeCount();
        int requestsBefore = provider.requestCount();
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliver(order);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(2);
        assertThat(provider.requestCount()).as("charge requests").isEqualTo(requestsBefore + 2);
        assertThat(provider.chargeCount()).as("charges made").isEqualTo(chargesBefore + 1);
        assertThat(invoices(order)).isEqualTo(1);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
    }

    @Test
    void whenTheProviderIsUnreachableTheEventIsHeldNotDeadLetteredAndChargedOnceItIsBack() throws Exception {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("1.000", "1.00"));
        int chargesBefore = provider.chargeCount();
        providerLink.cut();
        CompletableFuture<Void> delivery;
        try {
            delivery = this.deliveries.deliverAsync(order);
            // Longer than the three attempts would last, had the failure been the message's.
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(3)).until(() -> !delivery.isDone());
            assertThat(invoices(order)).isZero();
        } finally {
            providerLink.restore();
        }

        delivery.get(60, TimeUnit.SECONDS);
        assertThat(this.deliveries.lastError()).as("not dead-lettered").isNull();
        assertThat(invoices(order)).isEqualTo(1);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(provider.chargeCount()).isEqualTo(chargesBefore + 1);
    }

    @Test
    void aRetryAfterTheProvidersKeyExpiredFindsTheChargeInsteadOfChargingAgain() {
        EventEnvelope<Map<String, Object>> order =
                occurredAgo(Duration.ofHours(2), order("EUR", line("1.000", "3.00")));
        provider.keyLifetime(Duration.ZERO);
        int chargesBefore = provider.chargeCount();
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliver(order);

        assertThat(this.probe.invocations(FUNCTION))
                .as("the attempt whose commit failed, and its retry")
                .isEqualTo(2);
        assertThat(provider.chargeCount())
                .as("the provider no longer knew the key: the retry found the charge by the order's reference")
                .isEqualTo(chargesBefore + 1);
        assertThat(invoices(order)).isEqualTo(1);
        assertThat(this.deliveries.lastError()).isNull();
    }

    @Test
    void aRetryThatFindsItsKeyStillInFlightWaitsForTheFirstRequestInsteadOfFailing() {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("2.000", "1.50"));
        provider.processingTime(Duration.ofSeconds(3));
        int chargesBefore = provider.chargeCount();

        this.deliveries.deliver(order);

        assertThat(this.deliveries.lastError()).as("not dead-lettered").isNull();
        assertThat(this.probe.invocations(FUNCTION))
                .as("the attempt that timed out, and the one that waited out the conflict")
                .isEqualTo(2);
        assertThat(provider.chargeCount()).isEqualTo(chargesBefore + 1);
        assertThat(invoices(order)).isEqualTo(1);
    }

    /**
     * Thirteen characters of JSON that cost minutes of CPU: 10^100000000 is one digit and an exponent as a
     * BigDecimal, and rounding the total to cents writes out its hundred million digits, on each attempt.
     */
    @Test
    void anOrderWithAQuantityOfAHundredMillionDigitsIsRejectedBeforeAnyArithmetic() throws Exception {
        EventEnvelope<Map<String, Object>> order = order("EUR", line("1e100000000", "9.99"));
        int chargesBefore = provider.chargeCount();

        CompletableFuture<Void> delivery = this.deliveries.deliverAsync(order);

        delivery.get(60, TimeUnit.SECONDS);
        Message<?> error = this.deliveries.lastError();
        assertThat(error).as("the binder gave up on the message").isInstanceOf(ErrorMessage.class);
        Throwable failure = ((ErrorMessage) error).getPayload();
        assertThat(failure.getCause() != null ? failure.getCause().getMessage() : failure.getMessage())
                .startsWith("INVALID_PAYLOAD: ")
                .contains("payload.lines[0].quantity");
        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(invoices(order)).isZero();
        assertThat(provider.chargeCount()).isEqualTo(chargesBefore);
    }

    /**
     * An order that can never be charged (a currency the provider refuses with a 400, or one that is no currency at
     * all) fails the same way on every attempt: it goes to the dead-letter queue after one, without re-asking the
     * provider, rather than after three.
     */
    @ParameterizedTest
    @ValueSource(strings = {"XXX", "ZZZ"})
    void anOrderThatCanNeverBeChargedIsDeadLetteredAfterOneAttempt(String currency) throws Exception {
        EventEnvelope<Map<String, Object>> order = order(currency, line("1.000", "5.00"));
        int requestsBefore = provider.requestCount();

        this.deliveries.deliverAsync(order).get(60, TimeUnit.SECONDS);

        assertThat(this.deliveries.lastError())
                .as("the binder gave up on the message")
                .isInstanceOf(ErrorMessage.class);
        assertThat(this.probe.invocations(FUNCTION)).as("attempts").isEqualTo(1);
        assertThat(provider.requestCount() - requestsBefore)
                .as("requests to the provider")
                .isEqualTo(currency.equals("XXX") ? 1 : 0);
        assertThat(invoices(order)).isZero();
    }

    private static EventEnvelope<Map<String, Object>> occurredAgo(
            Duration age, EventEnvelope<Map<String, Object>> event) {
        return new EventEnvelope<>(
                event.eventId(), event.eventName(), Instant.now().minus(age), event.payload());
    }

    @SafeVarargs
    private static EventEnvelope<Map<String, Object>> order(String currency, Map<String, Object>... lines) {
        Map<String, Object> payload = Map.of(
                "orderId", UuidV7.generate().toString(),
                "customerId", UUID.randomUUID().toString(),
                "version", 1,
                "currency", currency,
                "lines", List.of(lines));
        return new EventEnvelope<>(UuidV7.generate(), "order.order.placed.v1", Instant.now(), payload);
    }

    private static Map<String, Object> line(String quantity, String unitPrice) {
        return Map.of("productId", UUID.randomUUID().toString(), "quantity", quantity, "unitPrice", unitPrice);
    }

    private static UUID orderId(EventEnvelope<Map<String, Object>> order) {
        return UUID.fromString((String) order.payload().get("orderId"));
    }

    private Map<String, Object> invoice(EventEnvelope<Map<String, Object>> order) {
        return this.jdbcTemplate.queryForMap(
                "SELECT amount, trim(currency) AS currency FROM invoice WHERE order_id = ?", orderId(order));
    }

    private int invoices(EventEnvelope<Map<String, Object>> order) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM invoice WHERE order_id = ?", Integer.class, orderId(order));
        return count != null ? count : 0;
    }
}
