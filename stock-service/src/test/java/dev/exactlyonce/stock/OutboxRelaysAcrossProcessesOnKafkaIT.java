package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;
import tools.jackson.databind.JsonNode;

/**
 * The outbox relays of two instances of a service, each a process of its own, share one outbox on a real PostgreSQL and
 * publish to Kafka (a broker started in the JVM, the topic in four partitions) while events of 50 keys are written; one
 * instance is killed with {@code kill -9} in the middle of the stream. Every event reaches the topic, and a consumer
 * reads each key's events first in the order they were written: the relay keys each record with the row's key, so a
 * key's events stay in one partition, and the relays share the outbox's partitions without reordering a key (the copies
 * of the killed relay's unmarked rows are allowed; a guard discards them). What {@code OutboxRelaysAcrossProcessesIT}
 * shows on RabbitMQ.
 */
class OutboxRelaysAcrossProcessesOnKafkaIT {

    /** An instance of a service that only emits: its relay publishes the schema's outbox to Kafka. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Instance {

        public static void main(String[] args) {
            new SpringApplicationBuilder(Instance.class)
                    .web(WebApplicationType.NONE)
                    .run(args);
        }
    }

    private static final String TOPIC = "test.thing.noticed.v1";

    private static final int KEYS = 50;

    private static final int EVENTS = 2_000;

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    private static EmbeddedKafkaKraftBroker kafka;

    @BeforeAll
    static void startKafka() {
        kafka = new EmbeddedKafkaKraftBroker(1, 4, TOPIC);
        kafka.afterPropertiesSet();
    }

    @AfterAll
    static void stopKafka() {
        kafka.destroy();
    }

    @Test
    void everyEventIsPublishedInOrderPerKeyWhenOneOfTheRelaysIsKilledMidStream() throws Exception {
        TestDatabase database = TestPostgres.newDatabase("kafkarelays");
        List<Process> processes = new ArrayList<>();
        AtomicBoolean reading = new AtomicBoolean(true);
        Received received = new Received();
        Thread consumer = new Thread(() -> received.read(reading), "topic-reader");
        consumer.start();
        try {
            for (int n = 0; n < 2; n++) {
                processes.add(start(database, n));
            }
            awaitInstancesStarted(2);
            JdbcTemplate jdbc = new JdbcTemplate(
                    new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));
            for (int written = 0; written < EVENTS; written += 50) {
                int first = written;
                jdbc.batchUpdate(
                        "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)"
                                + " VALUES (?, ?, ?, ?, ?::jsonb)",
                        IntStream.range(first, first + 50).boxed().toList(),
                        50,
                        (statement, n) -> {
                            statement.setObject(1, UuidV7.generate());
                            statement.setString(2, TOPIC);
                            statement.setString(3, "key-" + (n % KEYS));
                            statement.setString(4, TOPIC);
                            statement.setString(5, "{\"n\": %d}".formatted(n));
                        });
                if (written == EVENTS / 3) {
                    processes.get(0).destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
                // Paces the writes into a stream, so that the kill lands while the relays publish; no outcome awaited.
                TimeUnit.MILLISECONDS.sleep(10);
            }

            await().atMost(Duration.ofSeconds(120))
                    .alias("every event reaches the topic")
                    .until(() -> received.distinct() == EVENTS);
            Map<String, List<Integer>> firstSeen = received.firstSeenPerKey();
            assertThat(firstSeen).hasSize(KEYS);
            firstSeen.forEach((key, events) -> assertThat(events)
                    .as("the events of %s, in the order the consumer first read them", key)
                    .isSorted()
                    .hasSize(EVENTS / KEYS));
            assertThat(received.keysInOnePartition())
                    .as("each record keyed with its row's key, and each key's records in one partition")
                    .isTrue();
            assertThat(jdbc.queryForObject(
                            "SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class))
                    .isZero();
        } finally {
            processes.forEach(Process::destroyForcibly);
            reading.set(false);
            consumer.join(10_000);
        }
    }

    /** Starts an instance as a process of its own, from this test's class path, publishing to the embedded Kafka. */
    private static Process start(TestDatabase database, int n) throws IOException {
        Path log = Path.of("target", "outbox-kafka-relay-instance-" + n + ".log");
        Files.createDirectories(log.getParent());
        List<String> command = List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1",
                "-cp",
                System.getProperty("java.class.path"),
                Instance.class.getName(),
                "--spring.datasource.url=" + database.jdbcUrl(),
                "--spring.datasource.username=" + database.username(),
                "--spring.datasource.password=" + database.password(),
                "--spring.cloud.stream.default-binder=kafka",
                "--spring.cloud.stream.binders.kafka.type=kafka",
                "--spring.cloud.stream.kafka.binder.brokers=" + kafka.getBrokersAsString(),
                "--spring.cloud.function.definition=",
                "--idempotency.outbox.destination=" + TOPIC,
                "--idempotency.outbox.relay.poll-interval=100ms",
                "--idempotency.outbox.relay.batch-size=100",
                "--spring.main.banner-mode=off",
                // Nothing but the relay's daemon thread would keep it running.
                "--spring.main.keep-alive=true");
        return new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
    }

    private static void awaitInstancesStarted(int instances) {
        await().atMost(Duration.ofSeconds(120))
                .alias("every instance's relay runs")
                .until(() -> IntStream.range(0, instances).allMatch(n -> {
                    try {
                        return Files.readString(Path.of("target", "outbox-kafka-relay-instance-" + n + ".log"))
                                .contains("Relaying the outbox");
                    } catch (IOException ex) {
                        return false;
                    }
                }));
    }

    /**
     * What a consumer of the topic read, in the order it read it (a partition's records in their order), and whether
     * each record had its row's key and each key stayed in one partition.
     */
    private static final class Received {

        private final List<EventEnvelope<JsonNode>> events = Collections.synchronizedList(new ArrayList<>());

        private final Map<String, Integer> partitionOfKey = Collections.synchronizedMap(new LinkedHashMap<>());

        private volatile boolean keysInOnePartition = true;

        void read(AtomicBoolean reading) {
            Properties properties = new Properties();
            properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.getBrokersAsString());
            properties.put(ConsumerConfig.GROUP_ID_CONFIG, "test-" + UUID.randomUUID());
            properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            try (KafkaConsumer<String, byte[]> consumer =
                    new KafkaConsumer<>(properties, new StringDeserializer(), new ByteArrayDeserializer())) {
                consumer.subscribe(List.of(TOPIC));
                while (reading.get()) {
                    for (ConsumerRecord<String, byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        EventEnvelope<JsonNode> event = CODEC.decode(record.value());
                        String key = "key-" + (event.payload().get("n").asInt() % KEYS);
                        Integer before = this.partitionOfKey.putIfAbsent(key, record.partition());
                        if (!key.equals(record.key()) || (before != null && before != record.partition())) {
                            this.keysInOnePartition = false;
                        }
                        this.events.add(event);
                    }
                }
            }
        }

        long distinct() {
            synchronized (this.events) {
                return this.events.stream()
                        .map(EventEnvelope::eventId)
                        .distinct()
                        .count();
            }
        }

        boolean keysInOnePartition() {
            return this.keysInOnePartition;
        }

        /** Each key's events (their n), in the order the consumer read them first. */
        Map<String, List<Integer>> firstSeenPerKey() {
            Map<String, List<Integer>> perKey = new LinkedHashMap<>();
            synchronized (this.events) {
                this.events.stream()
                        .map(event -> event.payload().get("n").asInt())
                        .distinct()
                        .forEach(n -> perKey.computeIfAbsent("key-" + (n % KEYS), key -> new ArrayList<>())
                                .add(n));
            }
            return perKey;
        }
    }
}
