package dev.exactlyonce.billing;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.paymentprovider.PaymentProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The payment client follows no redirect: a 307 from the provider's address would make it send the charge, its amount
 * and its idempotency key to whatever host the answer names. Here the provider's address answers every request with a
 * 307 to another provider, which must never be asked.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.default-binder=test",
            "spring.cloud.stream.bindings.idempotencyGuardinvoiceOrder-in-0.consumer.max-attempts=1",
            "billing.payment-provider.timeout=1s",
            "billing.payment-provider.plain-http-allowed=true"
        })
@EnableIdempotencyTestKit
class PaymentProviderRedirectTests {

    /** The host a redirect would send the charge to. */
    private static final PaymentProvider elsewhere = PaymentProvider.start(0);

    private static final AtomicInteger redirected = new AtomicInteger();

    private static final HttpServer redirecting = redirectingTo("http://127.0.0.1:" + elsewhere.port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("billingredirect").registerDataSource(registry);
        registry.add(
                "billing.payment-provider.url",
                () -> "http://127.0.0.1:" + redirecting.getAddress().getPort());
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @AfterAll
    static void stop() {
        redirecting.stop(0);
        elsewhere.close();
    }

    @Test
    void aRedirectIsAFailureAndTheChargeGoesNowhereElse() {
        EventEnvelope<Map<String, Object>> order = new EventEnvelope<>(
                UuidV7.generate(),
                "order.order.placed.v1",
                Instant.now(),
                Map.of(
                        "orderId", UuidV7.generate().toString(),
                        "customerId", UUID.randomUUID().toString(),
                        "version", 1,
                        "currency", "EUR",
                        "lines",
                                List.of(Map.of(
                                        "productId", UUID.randomUUID().toString(),
                                        "quantity", "1.000",
                                        "unitPrice", "9.99"))));

        this.deliveries.deliver(order);

        assertThat(redirected.get()).as("the provider's address was asked").isPositive();
        assertThat(elsewhere.chargeCount())
                .as("charges made where the redirect pointed")
                .isZero();
        assertThat(this.deliveries.lastError()).as("the message failed").isNotNull();
        assertThat(this.jdbcTemplate.queryForObject("SELECT count(*) FROM payment", Integer.class))
                .isZero();
    }

    private static HttpServer redirectingTo(String target) {
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            server.createContext("/", exchange -> {
                redirected.incrementAndGet();
                exchange.getResponseHeaders().add("Location", target + exchange.getRequestURI());
                exchange.sendResponseHeaders(307, -1);
                exchange.close();
            });
            server.start();
            return server;
        } catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
    }
}
