package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * reserveStock behind the guard, on the test binder and a real PostgreSQL: the service's own configuration (three
 * attempts, back-off shortened), its own migrations, the library's table.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.default-binder=test",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-initial-interval=1",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-max-interval=1"
        })
@EnableIdempotencyTestKit
class ReserveStockTests {

    private static final String FUNCTION = "reserveStock";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("stock").registerDataSource(registry);
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
    }

    @Test
    void reservesEachLineOfAPlacedOrder() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(3);

        this.deliveries.deliver(order);

        assertThat(this.jdbcTemplate.queryForList(
                        "SELECT quantity FROM reservation WHERE order_id = ? ORDER BY quantity",
                        BigDecimal.class,
                        Orders.orderId(order)))
                .containsExactly(new BigDecimal("1.000"), new BigDecimal("2.000"), new BigDecimal("3.000"));
    }

    @Test
    void deliveringTheSameEventTwiceReservesStockOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        this.deliveries.deliver(order, 2);

        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
    }

    @Test
    void tellsEachReservedOrderOnceThroughItsOutboxInTheTransactionOfItsReservations() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        this.deliveries.deliver(order, 2);

        assertThat(stockReserved(order))
                .as("one stock.stock.reserved.v1 for the order, keyed by it, for the two copies")
                .singleElement()
                .satisfies(payload -> assertThat(payload)
                        .isEqualTo("{\"orderId\": \"%s\", \"reservations\": 2}".formatted(Orders.orderId(order))));
    }

    @Test
    void aFailedAttemptReservesNothingAndTheRetryReservesOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);
        this.probe.failNext(FUNCTION, 1);

        this.deliveries.deliver(order);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(2);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
    }

    @Test
    void whenEveryAttemptFailsNothingIsRecordedAndTheNextDeliveryReservesOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);
        this.probe.failNext(FUNCTION, 3);

        this.deliveries.deliver(order);

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(3);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isZero();
        assertThat(this.processedEvents.rows(order.eventId())).isZero();
        assertThat(stockReserved(order))
                .as("nothing emitted by the attempts that rolled back")
                .isEmpty();

        this.deliveries.deliver(order);

        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(stockReserved(order)).hasSize(1);
    }

    @Test
    void aCopyArrivingWhileTheFirstIsInFlightWaitsAndIsDiscardedWhenTheFirstCommits() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> first = this.deliveries.deliverAsync(order);
        pause.awaitReached();

        CompletableFuture<Void> second = this.deliveries.deliverAsync(order);
        awaitBlockedClaim();
        pause.release();
        CompletableFuture.allOf(first, second).join();

        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(1);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
    }

    @Test
    void aCopyArrivingWhileTheFirstIsInFlightReservesOnceWhenTheFirstRollsBack() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);
        Pause pause = this.probe.pauseNext(FUNCTION);
        CompletableFuture<Void> first = this.deliveries.deliverAsync(order);
        pause.awaitReached();

        CompletableFuture<Void> second = this.deliveries.deliverAsync(order);
        awaitBlockedClaim();
        pause.releaseWithFailure();
        CompletableFuture.allOf(first, second).join();

        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
    }

    @Test
    void copiesOfManyOrdersDeliveredConcurrentlyReserveEachOrderOnce() {
        List<EventEnvelope<Map<String, Object>>> orders = List.of(Orders.placed(1), Orders.placed(2), Orders.placed(3));

        orders.forEach(order -> this.deliveries.deliverConcurrently(order, 4));

        assertThat(orders)
                .allSatisfy(order -> assertThat(Orders.reservations(this.jdbcTemplate, order))
                        .isEqualTo(Orders.lineCount(order)));
        assertThat(this.probe.invocations(FUNCTION)).isEqualTo(3);
    }

    private void awaitBlockedClaim() {
        await().atMost(Duration.ofSeconds(10)).until(() -> this.processedEvents.blockedClaims() == 1);
    }

    /** The payloads of the stock.stock.reserved.v1 the service wrote to its outbox for the order. */
    private List<String> stockReserved(EventEnvelope<Map<String, Object>> order) {
        return this.jdbcTemplate.queryForList(
                "SELECT payload::text FROM outbox_event WHERE type = 'stock.stock.reserved.v1' AND aggregateid = ?",
                String.class,
                Orders.orderId(order).toString());
    }
}
