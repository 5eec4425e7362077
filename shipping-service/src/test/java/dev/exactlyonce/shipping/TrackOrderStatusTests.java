package dev.exactlyonce.shipping;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** trackOrderStatus behind the guard, on the test binder and a real PostgreSQL. */
@SpringBootTest(properties = "spring.cloud.stream.default-binder=test")
@EnableIdempotencyTestKit
class TrackOrderStatusTests {

    private static final String FUNCTION = "trackOrderStatus";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("shipping").registerDataSource(registry);
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
    void anOrderCanLeaveOncePaidAndItsStockReservedAndACopyOfTheReservationAddsNothing() {
        UUID orderId = UUID.randomUUID();
        this.deliveries.deliver(ShopEvents.placed(orderId));
        this.deliveries.deliver(ShopEvents.statusChanged(orderId, "PAID", 2));
        assertThat(readyToLeave(orderId)).as("paid, stock not yet reserved").isFalse();

        EventEnvelope<Map<String, Object>> reserved = ShopEvents.stockReserved(orderId, 3);
        this.deliveries.deliver(reserved, 2);

        assertThat(readyToLeave(orderId)).isTrue();
        assertThat(this.jdbcTemplate.queryForList(
                        "SELECT reservations FROM order_stock WHERE order_id = ?", Integer.class, orderId))
                .as("one row for the event and its copy")
                .containsExactly(3);
        assertThat(status(orderId)).isEqualTo(Map.of("status", "PAID", "version", 2L));
    }

    private boolean readyToLeave(UUID orderId) {
        return Boolean.TRUE.equals(this.jdbcTemplate.queryForObject(
                "SELECT EXISTS (SELECT 1 FROM order_ready WHERE order_id = ?)", Boolean.class, orderId));
    }

    @ParameterizedTest(name = "shuffle seed {0}")
    @ValueSource(longs = {1, 2, 3, 5, 8, 13, 21, 34})
    void versionsDeliveredShuffledAndDuplicatedLeaveTheNewestStatus(long seed) {
        UUID orderId = UUID.randomUUID();
        List<EventEnvelope<Map<String, Object>>> versions = List.of(
                ShopEvents.placed(orderId),
                ShopEvents.statusChanged(orderId, "PAID", 2),
                ShopEvents.statusChanged(orderId, "READY_TO_SHIP", 3),
                ShopEvents.statusChanged(orderId, "CANCELLED", 4));
        Random random = new Random(seed);
        List<EventEnvelope<Map<String, Object>>> deliveries = new ArrayList<>();
        versions.forEach(
                event -> Collections.nCopies(1 + random.nextInt(3), event).forEach(deliveries::add));
        Collections.shuffle(deliveries, random);

        deliveries.forEach(this.deliveries::deliver);

        assertThat(status(orderId)).isEqualTo(Map.of("status", "CANCELLED", "version", 4L));
        assertThat(versions)
                .allSatisfy(event ->
                        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1));
        assertThat(this.probe.invocations(FUNCTION))
                .as("once per event, whatever its copies")
                .isEqualTo(4);
    }

    @Test
    void aStaleEventLeavesTheRowUnchangedAndIsRecordedAsProcessed() {
        UUID orderId = UUID.randomUUID();
        this.deliveries.deliver(ShopEvents.placed(orderId));
        this.deliveries.deliver(ShopEvents.statusChanged(orderId, "READY_TO_SHIP", 3));
        EventEnvelope<Map<String, Object>> stale = ShopEvents.statusChanged(orderId, "PAID", 2);

        this.deliveries.deliver(stale);

        assertThat(status(orderId)).isEqualTo(Map.of("status", "READY_TO_SHIP", "version", 3L));
        assertThat(this.processedEvents.rows(stale.eventId())).isEqualTo(1);
    }

    @Test
    void aStatusChangeArrivingBeforeThePlacedEventStillEndsWithTheNewestVersion() {
        UUID orderId = UUID.randomUUID();

        this.deliveries.deliver(ShopEvents.statusChanged(orderId, "PAID", 2));
        this.deliveries.deliver(ShopEvents.placed(orderId));

        assertThat(status(orderId)).isEqualTo(Map.of("status", "PAID", "version", 2L));
    }

    @Test
    void aStatusTheServiceDoesNotKnowIsRejectedWithoutEffect() {
        UUID orderId = UUID.randomUUID();
        EventEnvelope<Map<String, Object>> unknown = ShopEvents.statusChanged(orderId, "LOST_AT_SEA", 2);

        this.deliveries.deliver(unknown);

        assertThat(this.jdbcTemplate.queryForList("SELECT * FROM order_status WHERE order_id = ?", orderId))
                .isEmpty();
        assertThat(this.processedEvents.rows(unknown.eventId())).isZero();
        assertThat(this.probe.invocations(FUNCTION)).isZero();
        assertThat(this.deliveries.lastError())
                .as("handed to the binder to dead-letter, with its reason, not dropped")
                .isInstanceOfSatisfying(
                        ErrorMessage.class,
                        error -> assertThat(error.getPayload())
                                .hasStackTraceContaining("INVALID_PAYLOAD: ")
                                .hasStackTraceContaining("LOST_AT_SEA"));
    }

    private Map<String, Object> status(UUID orderId) {
        return this.jdbcTemplate.queryForMap("SELECT status, version FROM order_status WHERE order_id = ?", orderId);
    }
}
