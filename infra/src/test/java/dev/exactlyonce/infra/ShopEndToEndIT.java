package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.paymentprovider.PaymentProvider;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The three services run from their jars against empty databases. The shop's events, published with duplicates and
 * with status changes out of order, yield one reservation per line, one invoice per order, one charge per order at
 * the provider, and the newest status per order.
 */
class ShopEndToEndIT {

    private static final String[] STATUSES = {"PAID", "READY_TO_SHIP", "CANCELLED"};

    private static PaymentProvider provider;

    private static ShopServices shop;

    @BeforeAll
    static void start() {
        provider = PaymentProvider.start(0);
        shop = new ShopServices(provider.url()).start();
    }

    @AfterAll
    static void stop() {
        shop.close();
        provider.close();
    }

    @Test
    void duplicatesAndOutOfOrderVersionsYieldExactlyOneEffectPerEvent() {
        Random random = new Random(42);
        int orders = 40;
        List<EventEnvelope<Map<String, Object>>> events = new ArrayList<>();
        int lines = 0;
        for (int i = 0; i < orders; i++) {
            UUID orderId = UuidV7.generate();
            int orderLines = 1 + random.nextInt(3);
            lines += orderLines;
            events.add(placed(orderId, orderLines));
            for (int version = 2; version <= 4; version++) {
                events.add(statusChanged(orderId, STATUSES[version - 2], version));
            }
        }
        List<EventEnvelope<Map<String, Object>>> copies = new ArrayList<>();
        events.forEach(
                event -> Collections.nCopies(1 + random.nextInt(3), event).forEach(copies::add));
        Collections.shuffle(copies, random);

        copies.forEach(event -> shop.rabbit.publish(shop.exchange, event));

        int placedEvents = orders;
        int allEvents = events.size();
        await().atMost(Duration.ofSeconds(120))
                .until(() -> processed("stock-service") == placedEvents
                        && processed("shipping-service") == allEvents
                        && processed("billing-service") == placedEvents
                        && queuesDrained());
        assertThat(shop.count("stock-service", "SELECT count(*) FROM reservation"))
                .isEqualTo(lines);
        assertThat(shop.count("shipping-service", "SELECT count(*) FROM order_status"))
                .isEqualTo(orders);
        assertThat(shop.count(
                        "shipping-service",
                        "SELECT count(*) FROM order_status WHERE version = 4 AND status = 'CANCELLED'"))
                .isEqualTo(orders);
        assertThat(shop.count("billing-service", "SELECT count(*) FROM invoice"))
                .isEqualTo(orders);
        assertThat(provider.chargeCount()).isEqualTo(orders);
        assertThat(shop.services.values())
                .allSatisfy(service -> assertThat(shop.rabbit.messageCount(service.queue() + ".dlq"))
                        .as("dead letters of %s", service.name())
                        .isZero());
    }

    private static int processed(String service) {
        return shop.count(service, "SELECT count(*) FROM processed_event");
    }

    private static boolean queuesDrained() {
        return shop.services.values().stream().allMatch(service -> shop.rabbit.messageCount(service.queue()) == 0);
    }

    private static EventEnvelope<Map<String, Object>> placed(UUID orderId, int lines) {
        return new EventEnvelope<>(
                UuidV7.generate(),
                "order.order.placed.v1",
                Instant.now(),
                Map.of(
                        "orderId", orderId.toString(),
                        "customerId", UUID.randomUUID().toString(),
                        "version", 1,
                        "currency", "EUR",
                        "lines",
                                IntStream.range(0, lines)
                                        .mapToObj(line -> Map.of(
                                                "productId", UUID.randomUUID().toString(),
                                                "quantity", "2.000",
                                                "unitPrice", "4.99"))
                                        .toList()));
    }

    private static EventEnvelope<Map<String, Object>> statusChanged(UUID orderId, String status, int version) {
        return new EventEnvelope<>(
                UuidV7.generate(),
                "order.order.status-changed.v1",
                Instant.now(),
                Map.of("orderId", orderId.toString(), "status", status, "version", version));
    }
}
