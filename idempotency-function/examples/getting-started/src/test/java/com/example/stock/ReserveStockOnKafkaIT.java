package com.example.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.kafka.test.utils.KafkaTestUtils;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The same service on Kafka ({@code -Pkafka}, profile {@code kafka}), on a broker started in the test's JVM: the same
 * order sent twice is reserved once, and its reservation published once to its topic, keyed by the order.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardreserveStock-in-0.consumer.start-offset=earliest"
        })
@ActiveProfiles("kafka")
@EmbeddedKafka(topics = {"order.order.placed.v1", StockReserved.NAME})
@EnableIdempotencyTestKit(testBinder = false)
class ReserveStockOnKafkaIT {

    private static final String PUBLISHED =
            "SELECT count(*) FROM outbox_event WHERE aggregateid = ? AND published_at IS NOT NULL";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("getting_started").registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void theSameOrderSentTwiceIsReservedOnceAndItsReservationPublishedOnce() {
        EventEnvelope<OrderPlaced> event = ReserveStockTests.orderPlaced();
        String orderId = event.payload().orderId().toString();
        byte[] body = new EnvelopeCodec().encode(event);

        Map<String, Object> producerSettings =
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString());
        try (Producer<String, byte[]> producer =
                new KafkaProducer<>(producerSettings, new StringSerializer(), new ByteArraySerializer())) {
            producer.send(new ProducerRecord<>("order.order.placed.v1", orderId, body));
            producer.send(new ProducerRecord<>("order.order.placed.v1", orderId, body));
        }

        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(this.recorder.attempts(event.eventId()))
                        .hasSize(2));
        await().atMost(Duration.ofSeconds(60))
                .until(() -> count(PUBLISHED, orderId) == 1);
        assertThat(count("SELECT count(*) FROM reservation WHERE order_id = ?::uuid", orderId))
                .isEqualTo(1);
        assertThat(reservationsPublished(orderId)).hasSize(1);
    }

    private List<String> reservationsPublished(String orderId) {
        Map<String, Object> consumerSettings = Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString(),
                ConsumerConfig.GROUP_ID_CONFIG, "getting-started-test",
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (Consumer<String, byte[]> consumer =
                new KafkaConsumer<>(consumerSettings, new StringDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(StockReserved.NAME));
            // The first records, then whatever a later fetch would bring: a second publication is seen too.
            List<ConsumerRecord<String, byte[]>> records = new ArrayList<>();
            KafkaTestUtils.getRecords(consumer, Duration.ofSeconds(10), 1).forEach(records::add);
            consumer.poll(Duration.ofSeconds(2)).forEach(records::add);
            return records.stream()
                    .filter(record -> orderId.equals(record.key()))
                    .map(ConsumerRecord::key)
                    .toList();
        }
    }

    private int count(String sql, String argument) {
        return this.jdbcTemplate.queryForObject(sql, Integer.class, argument);
    }
}
