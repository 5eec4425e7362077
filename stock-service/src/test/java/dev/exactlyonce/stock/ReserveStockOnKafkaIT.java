package dev.exactlyonce.stock;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.json.JsonMapper;

/**
 * The stock service's functions, unchanged, on the Kafka binder (profile {@code kafka}) and a Kafka broker started in
 * the JVM: four partitions, four consumers, three attempts then the dead-letter topic.
 */
@SpringBootTest(
        properties = {
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.concurrency=4",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-initial-interval=50",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-max-interval=100",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardreserveStock-in-0.consumer.start-offset=earliest"
        })
@ActiveProfiles("kafka")
@EmbeddedKafka(
        partitions = 4,
        topics = {ReserveStockOnKafkaIT.TOPIC, ReserveStockOnKafkaIT.DEAD_LETTERS, ReserveStockOnKafkaIT.STOCK_RESERVED
        })
@EnableIdempotencyTestKit(testBinder = false)
class ReserveStockOnKafkaIT {

    static final String TOPIC = "order.order.placed.v1";

    static final String DEAD_LETTERS = "stock.events.dlq";

    static final String STOCK_RESERVED = "stock.stock.reserved.v1";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("stockkafka").registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    private final EnvelopeCodec codec = new EnvelopeCodec();

    @AfterEach
    void reset() {
        this.probe.reset();
        this.recorder.reset();
    }

    @Test
    void theSameEventSentTwiceReservesStockOnce() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        send(order, "key-1");
        send(order, "key-1");

        awaitAttempts(order, 2);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isEqualTo(2);
        assertThat(this.processedEvents.rows(order.eventId())).isEqualTo(1);
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(1);
    }

    @Test
    void theOutboxPublishesTheReservationOnceToItsTopicKeyedByTheOrderAfterTheCommit() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(2);

        send(order, "key-3");
        send(order, "key-3");

        String orderId = Orders.orderId(order).toString();
        await().atMost(Duration.ofSeconds(60))
                .until(() -> this.jdbcTemplate.queryForObject(
                                "SELECT count(*) FROM outbox_event WHERE aggregateid = ? AND published_at IS NOT NULL",
                                Integer.class,
                                orderId)
                        == 1);
        UUID eventId = this.jdbcTemplate.queryForObject(
                "SELECT id FROM outbox_event WHERE aggregateid = ?", UUID.class, orderId);
        List<ConsumerRecord<String, byte[]>> published = records(STOCK_RESERVED, orderId);
        assertThat(published).singleElement().satisfies(record -> {
            assertThat(record.key()).isEqualTo(orderId);
            EventEnvelope<?> envelope = this.codec.decode(record.value());
            assertThat(envelope.eventId()).isEqualTo(eventId);
            assertThat(envelope.eventName()).isEqualTo(STOCK_RESERVED);
            assertThat(envelope.payload().toString()).contains("\"reservations\":2");
        });
    }

    @Test
    void copiesOnEveryPartitionConsumedConcurrentlyReserveEachOrderOnce() {
        List<EventEnvelope<Map<String, Object>>> orders =
                List.of(Orders.placed(1), Orders.placed(2), Orders.placed(3), Orders.placed(1), Orders.placed(2));

        for (EventEnvelope<Map<String, Object>> order : orders) {
            for (int partition = 0; partition < 4; partition++) {
                send(new ProducerRecord<>(TOPIC, partition, "copy", this.codec.encode(order)));
            }
        }

        orders.forEach(order -> awaitAttempts(order, 4));
        assertThat(orders)
                .allSatisfy(order -> assertThat(Orders.reservations(this.jdbcTemplate, order))
                        .isEqualTo(Orders.lineCount(order)));
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(orders.size());
    }

    @Test
    void aHandlerThatKeepsFailingIsRetriedThenDeadLetteredWithoutAProcessedRow() {
        EventEnvelope<Map<String, Object>> order = Orders.placed(1);
        this.probe.failNext("reserveStock", 3);

        send(order, "key-2");

        ConsumerRecord<String, byte[]> deadLetter = deadLetter(order);
        assertThat(new String(
                        deadLetter.headers().lastHeader("x-exception-message").value(), UTF_8))
                .isEqualTo("failure injected by the test after reserveStock ran");
        assertThat(this.probe.invocations("reserveStock")).isEqualTo(3);
        assertThat(Orders.reservations(this.jdbcTemplate, order)).isZero();
        assertThat(this.processedEvents.rows(order.eventId())).isZero();
    }

    @Test
    void aPoisonMessageIsDeadLetteredAtOnceWithItsReason() {
        EventEnvelope<Map<String, Object>> marker = Orders.placed(1);

        send(new ProducerRecord<>(TOPIC, "poison", ("{\"event_id\": \"" + marker.eventId() + "\"}").getBytes(UTF_8)));

        ConsumerRecord<String, byte[]> deadLetter = deadLetter(marker);
        assertThat(new String(
                        deadLetter.headers().lastHeader("x-exception-message").value(), UTF_8))
                .startsWith("MISSING_FIELD: the envelope has no event_name");
        assertThat(this.recorder.attempts(marker.eventId())).hasSize(1);
    }

    @Test
    void poisonRecordsOfABatchAreDeadLetteredAloneWithTheirReasonsAndTheOthersReserveStockOnce() {
        List<EventEnvelope<Map<String, Object>>> orders = new ArrayList<>();
        // Published to the topic of another event: not the topic of its name.
        EventEnvelope<Map<String, Object>> unknown =
                new EventEnvelope<>(UuidV7.generate(), "order.order.unknown.v1", Instant.now(), Map.of());
        EventEnvelope<Map<String, Object>> unmappable =
                new EventEnvelope<>(UuidV7.generate(), Orders.PLACED, Instant.now(), Map.of("orderId", "x"));
        String notJson = "not json " + UUID.randomUUID();
        List<ProducerRecord<String, byte[]>> records = new ArrayList<>();
        // Without keys: a batch's header of record keys then holds nulls.
        for (int i = 0; i < 40; i++) {
            EventEnvelope<Map<String, Object>> order = Orders.placed(1);
            orders.add(order);
            records.add(new ProducerRecord<>(TOPIC, 0, null, this.codec.encode(order)));
            switch (i) {
                case 5 -> records.add(new ProducerRecord<>(TOPIC, 0, null, notJson.getBytes(UTF_8)));
                case 20 -> records.add(new ProducerRecord<>(TOPIC, 0, null, this.codec.encode(unknown)));
                case 35 -> records.add(new ProducerRecord<>(TOPIC, 0, null, this.codec.encode(unmappable)));
                default -> {}
            }
        }

        send(records);

        assertThat(reason(deadLetter(notJson))).startsWith("NOT_JSON: ");
        assertThat(reason(deadLetter(unknown.eventId().toString()))).startsWith("ROUTE_MISMATCH: ");
        assertThat(reason(deadLetter(unmappable.eventId().toString()))).startsWith("INVALID_PAYLOAD: ");
        await().atMost(Duration.ofSeconds(60))
                .until(() -> orders.stream().allMatch(order -> Orders.reservations(this.jdbcTemplate, order) > 0));
        assertThat(orders)
                .allSatisfy(order -> assertThat(Orders.reservations(this.jdbcTemplate, order))
                        .isEqualTo(1));
        assertThat(this.processedEvents.rows(unmappable.eventId())).isZero();
    }

    /**
     * A neighbour that may write to the topic sets, as a header of its own, the name under which the binder hands on
     * the topic a record came from: the route check reads the topic the broker gave the record.
     */
    @Test
    void aRecordWhoseHeadersNameAnotherTopicIsJudgedByTheTopicItCameFrom() {
        String otherName = "order.order.unknown.v1";
        EventEnvelope<Map<String, Object>> forged =
                new EventEnvelope<>(UuidV7.generate(), otherName, Instant.now(), Map.of());
        ProducerRecord<String, byte[]> record = new ProducerRecord<>(TOPIC, null, this.codec.encode(forged));
        record.headers().add("kafka_receivedTopic", otherName.getBytes(UTF_8));

        send(record);

        assertThat(reason(deadLetter(forged))).startsWith("ROUTE_MISMATCH: ").contains(TOPIC);
    }

    @Test
    void aBatchWhoseEffectFailsOnOneEventReservesTheOthersOnceAndDeadLettersThatOne() {
        List<EventEnvelope<Map<String, Object>>> orders = new ArrayList<>();
        // numeric(12, 3) cannot hold its quantity: the reservation's insert fails, whatever the attempt.
        EventEnvelope<Map<String, Object>> failing = new EventEnvelope<>(
                UuidV7.generate(),
                Orders.PLACED,
                Instant.now(),
                Map.of(
                        "orderId", UuidV7.generate().toString(),
                        "customerId", UUID.randomUUID().toString(),
                        "version", 1,
                        "currency", "EUR",
                        "lines",
                                List.of(Map.of(
                                        "productId",
                                        UUID.randomUUID().toString(),
                                        "quantity",
                                        "10000000000",
                                        "unitPrice",
                                        "9.90"))));
        List<ProducerRecord<String, byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            EventEnvelope<Map<String, Object>> order = i == 12 ? failing : Orders.placed(1);
            if (order != failing) {
                orders.add(order);
            }
            records.add(new ProducerRecord<>(TOPIC, 0, null, this.codec.encode(order)));
        }

        send(records);

        assertThat(reason(deadLetter(failing))).contains("numeric field overflow");
        await().atMost(Duration.ofSeconds(60))
                .until(() -> orders.stream().allMatch(order -> Orders.reservations(this.jdbcTemplate, order) > 0));
        assertThat(orders)
                .allSatisfy(order -> assertThat(Orders.reservations(this.jdbcTemplate, order))
                        .isEqualTo(1));
        assertThat(Orders.reservations(this.jdbcTemplate, failing)).isZero();
        assertThat(this.processedEvents.rows(failing.eventId())).isZero();
    }

    /** The event id and name in Kafka record headers, which arrive as bytes, around a bare payload. */
    @Nested
    @SpringBootTest(properties = "idempotency.event-id.source=header")
    class WithTheEventIdInAHeader {

        @Autowired
        DeliveryRecorder recorder;

        @Autowired
        JdbcTemplate jdbcTemplate;

        @Test
        void headerValuesArrivingAsBytesIdentifyTheEvent() {
            EventEnvelope<Map<String, Object>> order = Orders.placed(2);
            byte[] payload = JsonMapper.builder().build().writeValueAsBytes(order.payload());
            for (int copy = 0; copy < 2; copy++) {
                ProducerRecord<String, byte[]> record = new ProducerRecord<>(TOPIC, "key-3", payload);
                record.headers().add("event_id", order.eventId().toString().getBytes(UTF_8));
                record.headers().add("event_name", Orders.PLACED.getBytes(UTF_8));
                send(record);
            }

            await().atMost(Duration.ofSeconds(60))
                    .until(() -> this.recorder.attempts().size() >= 2);
            assertThat(this.jdbcTemplate.queryForObject(
                            "SELECT count(*) FROM reservation WHERE order_id = ?",
                            Integer.class,
                            Orders.orderId(order)))
                    .isEqualTo(2);
            assertThat(this.jdbcTemplate.queryForObject(
                            "SELECT count(*) FROM processed_event WHERE event_id = ?", Integer.class, order.eventId()))
                    .isEqualTo(1);
        }
    }

    private void send(EventEnvelope<?> event, String key) {
        send(new ProducerRecord<>(TOPIC, key, this.codec.encode(event)));
    }

    private void send(ProducerRecord<String, byte[]> record) {
        send(List.of(record));
    }

    private void send(List<ProducerRecord<String, byte[]>> records) {
        KafkaRecords.send(this.kafka, records);
    }

    private static String reason(ConsumerRecord<String, byte[]> deadLetter) {
        return new String(deadLetter.headers().lastHeader("x-exception-message").value(), UTF_8);
    }

    private ConsumerRecord<String, byte[]> deadLetter(EventEnvelope<?> event) {
        return deadLetter(event.eventId().toString());
    }

    /** The dead letter whose value contains that text. */
    private ConsumerRecord<String, byte[]> deadLetter(String id) {
        List<ConsumerRecord<String, byte[]>> deadLetters = records(DEAD_LETTERS, id);
        assertThat(deadLetters).as("a dead letter of " + id + " within 60 s").isNotEmpty();
        return deadLetters.get(0);
    }

    /** The records of the topic whose value contains that text, read from the start until none came for 2 s. */
    private List<ConsumerRecord<String, byte[]>> records(String topic, String text) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, this.kafka.getBrokersAsString());
        properties.put(ConsumerConfig.GROUP_ID_CONFIG, "test-" + UUID.randomUUID());
        properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<ConsumerRecord<String, byte[]>> found = new ArrayList<>();
        try (KafkaConsumer<String, byte[]> consumer =
                new KafkaConsumer<>(properties, new StringDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long quietSince = System.nanoTime();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline
                    && (found.isEmpty()
                            || System.nanoTime() - quietSince
                                    < Duration.ofSeconds(2).toNanos())) {
                for (ConsumerRecord<String, byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    if (new String(record.value(), UTF_8).contains(text)) {
                        found.add(record);
                        quietSince = System.nanoTime();
                    }
                }
            }
        }
        return found;
    }

    private void awaitAttempts(EventEnvelope<?> event, int count) {
        await().atMost(Duration.ofSeconds(60))
                .until(() -> this.recorder.attempts(event.eventId()).size() >= count);
    }
}
