package dev.exactlyonce.infra.bench;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.jspecify.annotations.Nullable;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * Kafka: the brokers {@code KAFKA_BROKERS} names, or else one started in this JVM for the run (Spring Kafka's embedded
 * KRaft broker). The destination is a topic of {@value #PARTITIONS} partitions; the refusing one takes no record
 * larger than {@value #REFUSING_MAX_BYTES} bytes ({@code max.message.bytes}), so it refuses every event
 * ({@code RecordTooLargeException}). The relay's sends wait for the acknowledgement ({@code acks=all}).
 */
final class KafkaOutboxBroker implements OutboxBroker {

    private static final int PARTITIONS = 8;

    private static final int REFUSING_MAX_BYTES = 64;

    private static final EnvelopeCodec codec = new EnvelopeCodec();

    private final String brokers;

    private final @Nullable EmbeddedKafkaKraftBroker embedded;

    private volatile boolean consuming;

    private @Nullable Thread consumer;

    private List<String> topics = List.of();

    private KafkaOutboxBroker(String brokers, @Nullable EmbeddedKafkaKraftBroker embedded) {
        this.brokers = brokers;
        this.embedded = embedded;
    }

    static KafkaOutboxBroker fromEnvironment(Map<String, String> env) {
        String brokers = env.get("KAFKA_BROKERS");
        if (brokers != null) {
            return new KafkaOutboxBroker(brokers, null);
        }
        EmbeddedKafkaKraftBroker embedded = new EmbeddedKafkaKraftBroker(1, PARTITIONS);
        embedded.afterPropertiesSet();
        return new KafkaOutboxBroker(embedded.getBrokersAsString(), embedded);
    }

    @Override
    public String describe() {
        return "Kafka %s%s, acks=all".formatted(this.brokers, this.embedded != null ? " (embedded, this JVM)" : "");
    }

    @Override
    public void start(String destination, String refusing, Arrivals arrivals) throws Exception {
        this.topics = List.of(destination, refusing);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, this.brokers))) {
            admin.createTopics(List.of(
                            new NewTopic(destination, PARTITIONS, (short) 1),
                            new NewTopic(refusing, 1, (short) 1)
                                    .configs(Map.of("max.message.bytes", String.valueOf(REFUSING_MAX_BYTES)))))
                    .all()
                    .get(30, TimeUnit.SECONDS);
        }
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, this.brokers);
        KafkaConsumer<byte[], byte[]> kafka =
                new KafkaConsumer<>(properties, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        try {
            // The partitions it was made with: its metadata may not have reached every broker yet.
            List<TopicPartition> partitions = IntStream.range(0, PARTITIONS)
                    .mapToObj(partition -> new TopicPartition(destination, partition))
                    .toList();
            kafka.assign(partitions);
            kafka.seekToEnd(partitions);
            partitions.forEach(kafka::position);
        } catch (RuntimeException ex) {
            kafka.close();
            throw ex;
        }
        this.consuming = true;
        this.consumer = new Thread(
                () -> {
                    try (kafka) {
                        while (this.consuming) {
                            for (ConsumerRecord<byte[], byte[]> record : kafka.poll(Duration.ofMillis(100))) {
                                arrivals.arrived(
                                        codec.read(record.value()).eventId().toString());
                            }
                        }
                    }
                },
                "bench-outbox-consumer");
        this.consumer.setDaemon(true);
        this.consumer.start();
    }

    @Override
    public List<String> properties(String destination, String refusing) {
        return List.of(
                "spring.cloud.stream.default-binder=kafka",
                "spring.cloud.stream.kafka.binder.brokers=" + this.brokers,
                // The producer's listener logs each refused record at ERROR with its stack trace: expected here.
                "logging.level.org.springframework.kafka.support.LoggingProducerListener=OFF");
    }

    @Override
    public void close() throws Exception {
        this.consuming = false;
        if (this.consumer != null) {
            this.consumer.join(5_000);
        }
        if (this.embedded != null) {
            this.embedded.destroy();
        } else if (!this.topics.isEmpty()) {
            // The run's topics, on brokers of the user's.
            try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, this.brokers))) {
                admin.deleteTopics(this.topics).all().get(30, TimeUnit.SECONDS);
            }
        }
    }
}
