package dev.exactlyonce.idempotency.binder.kafka;

import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binder.Binding;
import org.springframework.cloud.stream.binding.BindingService;
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
 * A single-message Kafka binding during an outage: the Kafka binder can pause a binding, so the outage pauses it
 * instead of holding its records. Its consumers go on polling (they stay in their group) and are handed no record
 * while PostgreSQL is away; the binding resumes when it answers, and every event is applied once.
 */
@SpringBootTest(
        classes = OutagePausesTheBindingOnKafkaIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=kafka",
            "spring.cloud.stream.kafka.binder.brokers=${spring.embedded.kafka.brokers}",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.destination="
                    + OutagePausesTheBindingOnKafkaIT.TOPIC,
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.group=kafka-pause",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.concurrency=2",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.max-attempts=3",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.back-off-initial-interval=100",
            "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.back-off-max-interval=200",
            "spring.cloud.stream.kafka.bindings.idempotencyGuardrecordThing-in-0.consumer.start-offset=earliest",
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=500ms",
            "idempotency.outage.probe-max-interval=2s"
        })
@EmbeddedKafka(partitions = 2, topics = OutagePausesTheBindingOnKafkaIT.TOPIC)
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
// Its @AfterAll closes what the context connects through: the context must not stay cached.
@DirtiesContext
class OutagePausesTheBindingOnKafkaIT {

    /** The service: its business function, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    /** The event's name: the route check accepts an event only from the topic of its own name. */
    static final String TOPIC = ThingHappened.NAME;

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    private static final TestDatabase database = TestPostgres.newDatabase("kafkapause");

    /**
     * Made for each class, before its context (a subclass runs the test again on another context, after this class
     * closed its own proxy, or before).
     */
    private static TcpProxy postgres;

    @BeforeAll
    static void proxy() {
        postgres =
                TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());
    }

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @Autowired
    EmbeddedKafkaBroker kafka;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BindingService bindingService;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void theBindingIsPausedWhileTheDatabaseIsAwayAndResumedWhenItAnswers() {
        EventEnvelope<ThingHappened> before = Things.thingHappened();
        send(before, 0);
        await().atMost(Duration.ofSeconds(60)).until(() -> effects(before) == 1);

        postgres.cut();
        List<EventEnvelope<ThingHappened>> during =
                IntStream.range(0, 4).mapToObj(i -> Things.thingHappened()).toList();
        for (int i = 0; i < during.size(); i++) {
            send(during.get(i), i % 2);
        }
        await().atMost(Duration.ofSeconds(20))
                .alias("the binding paused: its consumers poll on, and are handed no record")
                .until(this::paused);
        // The attempts in flight when it paused end (each record's retries, then its give-back), then none follows.
        await().pollDelay(Duration.ofSeconds(2)).until(() -> true);
        int attempts = this.recorder.attempts().size();
        await().during(Duration.ofSeconds(4))
                .atMost(Duration.ofSeconds(5))
                .alias("no record delivered while the binding is paused")
                .until(() -> this.recorder.attempts().size() == attempts);
        postgres.restore();

        await().atMost(Duration.ofSeconds(60)).until(() -> during.stream().allMatch(event -> effects(event) == 1));
        await().atMost(Duration.ofSeconds(10)).alias("the binding resumed").until(() -> !paused());
    }

    private boolean paused() {
        List<Binding<?>> bindings = this.bindingService.getConsumerBindings(BINDING);
        return !bindings.isEmpty() && bindings.stream().allMatch(Binding::isPaused);
    }

    private void send(EventEnvelope<?> event, int partition) {
        KafkaRecords.send(
                this.kafka,
                List.of(new ProducerRecord<>(TOPIC, partition, "thing", new EnvelopeCodec().encode(event))));
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
