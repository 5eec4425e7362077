package dev.exactlyonce.shipping;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The shipping service's function, unchanged, on the Kafka binder: one binding subscribed to the topics of both events
 * it handles, copies and versions out of order, the newest status kept.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardtrackOrderStatus-in-0.consumer.start-offset=earliest"
        })
@ActiveProfiles("kafka")
@EmbeddedKafka(
        partitions = 2,
        topics = {ShopEvents.PLACED, ShopEvents.STATUS_CHANGED, "shipping.events.dlq"})
@EnableIdempotencyTestKit(testBinder = false)
class TrackOrderStatusOnKafkaIT {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("shippingkafka").registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void copiesAndLateVersionsOnTwoTopicsLeaveTheNewestStatus() {
        UUID orderId = UUID.randomUUID();
        EventEnvelope<Map<String, Object>> placed = ShopEvents.placed(orderId);
        EventEnvelope<Map<String, Object>> paid = ShopEvents.statusChanged(orderId, "PAID", 2);
        EventEnvelope<Map<String, Object>> ready = ShopEvents.statusChanged(orderId, "READY_TO_SHIP", 3);
        List<EventEnvelope<Map<String, Object>>> events = List.of(ready, placed, paid, ready, placed);
        Properties properties = new Properties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString());
        EnvelopeCodec codec = new EnvelopeCodec();
        try (KafkaProducer<String, byte[]> producer =
                new KafkaProducer<>(properties, new StringSerializer(), new ByteArraySerializer())) {
            events.forEach(event ->
                    producer.send(new ProducerRecord<>(event.eventName(), orderId.toString(), codec.encode(event))));
        }

        await().atMost(Duration.ofSeconds(60))
                .until(() ->
                        this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class) == 3);
        assertThat(this.jdbcTemplate.queryForMap(
                        "SELECT status, version FROM order_status WHERE order_id = ?", orderId))
                .isEqualTo(Map.of("status", "READY_TO_SHIP", "version", 3L));
    }
}
