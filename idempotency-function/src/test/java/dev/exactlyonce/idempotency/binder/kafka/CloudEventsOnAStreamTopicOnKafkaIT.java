package dev.exactlyonce.idempotency.binder.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.kafka.test.EmbeddedKafkaBroker;
import org.springframework.kafka.test.context.EmbeddedKafka;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * README's minimal adoption on Kafka, with a CloudEvents producer as Kafka users have them: a topic named for its
 * stream ({@code things-ce}), not for the event, carrying CloudEvents in binary mode (the {@code ce_} headers the
 * CloudEvents SDK's Kafka binding writes, the data as the record's value). The binding declares which event types its
 * topic may carry ({@code idempotency.bindings.<binding>.routes[things-ce]}); the route check then takes those, each
 * once, and still refuses a type the topic may not carry.
 */
@SpringBootTest(
        classes = CloudEventsOnAStreamTopicOnKafkaIT.Service.class,
        properties = {
            "spring.config.name=minimal-service",
            "spring.cloud.stream.default-binder=kafka",
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.destination="
                    + CloudEventsOnAStreamTopicOnKafkaIT.TOPIC + "," + CloudEventsOnAStreamTopicOnKafkaIT.OTHER_TOPIC,
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.group=kafka-cloudevents",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.start-offset=earliest",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.dlq-name="
                    + CloudEventsOnAStreamTopicOnKafkaIT.DEAD_LETTERS,
            "idempotency.event-id.source=cloudevents",
            "idempotency.bindings.idempotencyGuardrecordThing-in-0.routes[" + CloudEventsOnAStreamTopicOnKafkaIT.TOPIC
                    + "]=" + ThingHappened.NAME
        })
@EmbeddedKafka(
        partitions = 1,
        topics = {
            CloudEventsOnAStreamTopicOnKafkaIT.TOPIC,
            CloudEventsOnAStreamTopicOnKafkaIT.OTHER_TOPIC,
            CloudEventsOnAStreamTopicOnKafkaIT.DEAD_LETTERS
        })
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
// Its embedded broker stops with the class: the context must not stay cached, its consumers reconnecting to whichever
// broker later takes that port, and taking part in another test's topic.
@DirtiesContext
class CloudEventsOnAStreamTopicOnKafkaIT {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    /** The stream's topic, which carries the event type the binding declares for it. */
    static final String TOPIC = "things-ce";

    /** Another topic the binding reads, for which it declares no type: a neighbour may write to it. */
    static final String OTHER_TOPIC = "others-ce";

    static final String DEAD_LETTERS = "kafka-cloudevents.dlq";

    private static final TestDatabase database = TestPostgres.newDatabase("kafkacloudevents");

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aCloudEventOfTheTypeItsTopicCarriesIsAppliedOnceAndAnotherTypeOnAnotherTopicIsRefused() {
        UUID thing = UUID.randomUUID();
        UUID eventId = UUID.randomUUID();
        UUID forged = UUID.randomUUID();

        KafkaRecords.send(
                this.kafka,
                List.of(
                        cloudEvent(TOPIC, eventId, thing),
                        cloudEvent(TOPIC, eventId, thing),
                        cloudEvent(OTHER_TOPIC, UUID.randomUUID(), forged)));

        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(amounts(thing)).containsExactly(new BigDecimal("2.500")));
        ConsumerRecord<byte[], byte[]> deadLetter =
                KafkaRecords.first(this.kafka, DEAD_LETTERS, Duration.ofSeconds(60));
        assertThat(new String(
                        deadLetter.headers().lastHeader("x-exception-message").value(), UTF_8))
                .startsWith("ROUTE_MISMATCH: ")
                .contains(OTHER_TOPIC);
        assertThat(amounts(forged))
                .as("the event of a type its topic may not carry")
                .isEmpty();
        assertThat(amounts(thing)).as("the copy discarded").hasSize(1);
    }

    /** A CloudEvent in Kafka's binary mode, as the CloudEvents SDK's Kafka serializer writes it. */
    private static ProducerRecord<String, byte[]> cloudEvent(String topic, UUID eventId, UUID thing) {
        ProducerRecord<String, byte[]> record = new ProducerRecord<>(
                topic,
                thing.toString(),
                "{\"thingId\":\"%s\",\"amount\":\"2.500\"}".formatted(thing).getBytes(UTF_8));
        Map<String, String> headers = Map.of(
                "ce_specversion",
                "1.0",
                "ce_id",
                eventId.toString(),
                "ce_source",
                "/things",
                "ce_type",
                ThingHappened.NAME,
                "ce_time",
                Instant.now().toString(),
                "content-type",
                "application/json");
        headers.forEach((name, value) -> record.headers().add(new RecordHeader(name, value.getBytes(UTF_8))));
        return record;
    }

    private List<BigDecimal> amounts(UUID thing) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?", BigDecimal.class, thing);
    }
}
