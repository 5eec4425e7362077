package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.kafka.test.EmbeddedKafkaBroker;

/** What the tests on a transactional Kafka binder share. */
final class TransactionalKafkaBinder {

    /** The transactional producer's serializers, which write its dead letters. */
    static final String SERIALIZER = "dev.exactlyonce.idempotency.binder.kafka.DeadLetterSerializer";

    private static final Pattern LOG_LINE = Pattern.compile("\\d{4}-\\d{2}-\\d{2}T");

    private TransactionalKafkaBinder() {}

    /**
     * The committed records of a topic (none where the topic does not exist), read from its beginning to its end: on a
     * topic written in transactions, offsets also count the transactions' markers.
     */
    static long records(EmbeddedKafkaBroker kafka, String topic) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.getBrokersAsString());
        properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(properties, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(partition -> new TopicPartition(partition.topic(), partition.partition()))
                    .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            long records = 0;
            while (partitions.stream().anyMatch(partition -> consumer.position(partition) < ends.get(partition))) {
                records += consumer.poll(Duration.ofMillis(500)).count();
            }
            return records;
        }
    }

    /**
     * The container logs each rolled-back transaction, with its exception: a give-back's is one line, its reason, and
     * no stack trace follows it.
     */
    static void assertGiveBacksLoggedWithoutStackTraces(CapturedOutput output) {
        List<String> lines = output.getAll().lines().toList();
        int rolledBack = 0;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains("Transaction rolled back")) {
                rolledBack++;
                // What the line logs, up to the next line of the log (each starts with its date).
                List<String> logged = lines.subList(i + 1, lines.size()).stream()
                        .takeWhile(line -> !LOG_LINE.matcher(line).lookingAt())
                        .toList();
                assertThat(logged)
                        .as("what the rolled-back transaction's line logs, at line %d", i)
                        .anyMatch(line -> line.contains("given back to be delivered again"))
                        .noneMatch(line -> line.startsWith("\tat ") || line.startsWith("Caused by"));
            }
        }
        assertThat(rolledBack).as("rolled-back transactions logged").isPositive();
    }
}
