package dev.exactlyonce.billing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.paymentprovider.PaymentProvider;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Billing's commit whose outcome it never learns: the connection is cut while PostgreSQL runs the {@code COMMIT} of
 * the invoice (a deferred trigger holds it for two seconds), so the server commits the claim, the invoice and the
 * payment, and the service sees its connection fail. The message is delivered again and found a duplicate: one
 * invoice, and one charge at the provider, asked for once.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.default-binder=test",
            "spring.datasource.hikari.connection-timeout=1000",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=2s",
            "billing.payment-provider.timeout=5s",
            "billing.payment-provider.plain-http-allowed=true"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through: the context must not stay cached.
@DirtiesContext
class CommitOutcomeUnknownTests {

    private static final PaymentProvider provider = PaymentProvider.start(0);

    private static final TestDatabase database = TestPostgres.newDatabase("billingcommit");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        registry.add("billing.payment-provider.url", provider::url);
    }

    @AfterAll
    static void close() {
        postgres.close();
        provider.close();
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    DeliveryRecorder recorder;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void anInvoiceWhoseCommitsAnswerIsLostIsFoundCommittedAndChargedOnce() throws Exception {
        this.jdbcTemplate.execute("""
                CREATE OR REPLACE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_sleep(2);
                    RETURN NULL;
                END $$""");
        this.jdbcTemplate.execute("""
                CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON invoice
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()""");
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
                                        "unitPrice", "7.07"))));
        UUID orderId = UUID.fromString((String) order.payload().get("orderId"));
        int chargesBefore = provider.chargeCount();
        int requestsBefore = provider.requestCount();
        try {
            CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(order, Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(10))
                    .alias("billing's COMMIT running on the server")
                    .until(() -> this.jdbcTemplate.queryForObject(
                                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'COMMIT'"
                                            + " AND wait_event = 'PgSleep' AND datname = current_database()",
                                    Integer.class)
                            == 1);
            postgres.cut();
            await().atMost(Duration.ofSeconds(10))
                    .alias("the commit done on the server, its answer lost")
                    .until(() -> invoices(orderId) == 1);
            postgres.restore();

            delivery.get(60, TimeUnit.SECONDS);
        } finally {
            postgres.restore();
            this.jdbcTemplate.execute("DROP TRIGGER slow_commit ON invoice");
        }

        assertThat(this.recorder.attempts(order.eventId()))
                .as("the attempt whose commit's answer was lost, failed; then the redelivery, a duplicate")
                .hasSizeGreaterThanOrEqualTo(2)
                .first()
                .satisfies(attempt -> assertThat(attempt.failure()).isNotNull());
        assertThat(invoices(orderId)).as("one invoice").isEqualTo(1);
        assertThat(provider.chargeCount()).as("charges made").isEqualTo(chargesBefore + 1);
        assertThat(provider.requestCount())
                .as("charge requests: the redelivery was found a duplicate before any")
                .isEqualTo(requestsBefore + 1);
        assertThat(this.probe.invocations("invoiceOrder")).isEqualTo(1);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
    }

    private int invoices(UUID orderId) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM invoice WHERE order_id = ?", Integer.class, orderId);
        return count != null ? count : 0;
    }
}
