package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;

/**
 * A guarded Kafka binding reads records natively, so its dead-letter producer needs serializers for the key and value
 * as the consumer deserialized them. The library gives it byte arrays (ReserveStockOnKafkaIT dead-letters a keyed
 * record with the profile's configuration, which sets none); a consumer that deserializes keys to strings, with no
 * serializer for its dead letters, would lose every rejected record with a key, and is refused at start-up.
 */
@EmbeddedKafka(partitions = 1)
class DeadLetterSerializersOnKafkaIT {

    private static final String CONSUMER =
            "spring.cloud.stream.kafka.bindings.idempotencyGuardreserveStock-in-0.consumer.";

    @Test
    void aConsumerThatReadsKeysAsStringsWithoutASerializerForItsDeadLettersIsRefusedAtStartUp(
            EmbeddedKafkaBroker kafka) {
        Throwable failure = catchThrowable(() -> start(
                        kafka,
                        CONSUMER
                                + "configuration.key.deserializer=org.apache.kafka.common.serialization.StringDeserializer")
                .close());

        assertThat(messages(failure))
                .anySatisfy(message -> assertThat(message)
                        .contains("reads record keys with org.apache.kafka.common.serialization.StringDeserializer")
                        .contains("dead-letter producer has no key.serializer"));
    }

    @Test
    void theSameConsumerWithASerializerForItsDeadLettersStarts(EmbeddedKafkaBroker kafka) {
        start(
                        kafka,
                        CONSUMER
                                + "configuration.key.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
                        CONSUMER + "dlq-producer-properties.configuration.key.serializer="
                                + "org.apache.kafka.common.serialization.StringSerializer")
                .close();
    }

    private static ConfigurableApplicationContext start(EmbeddedKafkaBroker kafka, String... properties) {
        TestDatabase database = TestPostgres.newDatabase("stockdlqser");
        List<String> all = new ArrayList<>(List.of(
                "spring.datasource.url=" + database.jdbcUrl(),
                "spring.datasource.username=" + database.username(),
                "spring.datasource.password=" + database.password(),
                "spring.cloud.stream.kafka.binder.brokers=" + kafka.getBrokersAsString(),
                "server.port=0",
                "management.server.port=0"));
        all.addAll(List.of(properties));
        // As arguments: the builder's properties are defaults, below application.yml's.
        return new SpringApplicationBuilder(StockServiceApplication.class)
                .profiles("kafka")
                .run(all.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private static List<String> messages(Throwable failure) {
        List<String> messages = new ArrayList<>();
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            messages.add(String.valueOf(cause.getMessage()));
        }
        return messages;
    }
}
