package dev.exactlyonce.idempotency.binder.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.test.EmbeddedKafkaBroker;

/**
 * Publishes records to the embedded Kafka as a producing service would (a string key, the envelope's bytes), and reads
 * the first record a topic holds.
 */
final class KafkaRecords {

    private KafkaRecords() {}

    /** Sends the records with one producer, in their order, so that the consumer polls them together. */
    static void send(EmbeddedKafkaBroker kafka, List<ProducerRecord<String, byte[]>> records) {
        Properties properties = new Properties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.getBrokersAsString());
        properties.put(ProducerConfig.LINGER_MS_CONFIG, 50);
        try (KafkaProducer<String, byte[]> producer =
                new KafkaProducer<>(properties, new StringSerializer(), new ByteArraySerializer())) {
            records.forEach(producer::send);
        }
    }

    /** The first record of the topic, read from its start by a group of its own, waiting for one at most that long. */
    static ConsumerRecord<byte[], byte[]> first(EmbeddedKafkaBroker kafka, String topic, Duration within) {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                Map.of(
                        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                        kafka.getBrokersAsString(),
                        ConsumerConfig.GROUP_ID_CONFIG,
                        "first-of-" + UUID.randomUUID(),
                        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                        "earliest"),
                new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + within.toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    return record;
                }
            }
        }
        throw new AssertionError("Nothing reached " + topic + " within " + within);
    }
}
