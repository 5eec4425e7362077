package dev.exactlyonce.idempotency.binder.kafka;

import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.test.EmbeddedKafkaBroker;

/** Publishes records to the embedded Kafka as a producing service would: a string key, the envelope's bytes. */
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
}
