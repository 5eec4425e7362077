package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestKafkaCluster;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A guarded service on a three-broker Kafka (infra/cluster.sh), its topic of three partitions replicated three times
 * ({@code min.insync.replicas} 2), given every broker's address, while events stream in: the broker that coordinates
 * the service's group (and leads a partition) is killed ({@code kill -9}), or cut off from the others and from the
 * service for 20 s and then healed: the records the service applied and had not committed to it are given to it
 * again. Every event's effect is applied once, nothing reaches the dead-letter topic, and the group ends with no lag. The cluster is {@code KAFKA_CLUSTER} (its addresses) and {@code KAFKA_CLUSTER_CONTROL} (the command that acts
 * on its brokers, {@code infra/cluster.sh kafka}); {@code .ci/run} starts it and sets both.
 */
@DirtiesContext
@SpringBootTest(
        classes = NodeFaultsOnKafkaClusterIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=kafka",
            // The topic is this run's, not the event's name.
            "idempotency.event-id.route-check=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
@EnabledIfEnvironmentVariable(named = "KAFKA_CLUSTER", matches = ".+")
@SharedServers.Alone(SharedServers.Server.KAFKA_CLUSTER)
class NodeFaultsOnKafkaClusterIT {

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

    /** How long a broker stays cut off. */
    private static final Duration CUT = Duration.ofSeconds(20);

    /** Events applied before the fault, and the stream's pace: 20 events every 200 ms. */
    private static final int BEFORE_THE_FAULT = 500;

    private static final int PER_BATCH = 20;

    private static final Duration PACE = Duration.ofMillis(200);

    private static final TestKafkaCluster cluster = TestKafkaCluster.fromEnvironment();

    private static final String RUN =
            Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private static final String TOPIC = "node-faults." + RUN;

    private static final String DEAD_LETTERS = TOPIC + ".dlq";

    private static final String GROUP = "things";

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("kafkanodefaults").registerDataSource(registry);
        cluster.registerBinder(registry);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".destination", () -> TOPIC);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".group", () -> GROUP);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".consumer.concurrency", () -> "3");
        String kafka = "spring.cloud.stream.kafka.bindings." + BINDING + ".consumer.";
        registry.add(kafka + "start-offset", () -> "earliest");
        registry.add(kafka + "enable-dlq", () -> "true");
        registry.add(kafka + "dlq-name", () -> DEAD_LETTERS);
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @BeforeAll
    static void topics() throws Exception {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 3), new NewTopic(DEAD_LETTERS, 1, (short) 3)))
                    .all()
                    .get(60, TimeUnit.SECONDS);
        }
    }

    @BeforeEach
    void noEffectYet() {
        // The test before ended with no lag (it asserted it): its effects are none of this one's.
        this.jdbcTemplate.update("DELETE FROM thing_effect");
    }

    @AfterEach
    void everyBrokerBack() {
        cluster.control("heal");
        for (int broker = 1; broker <= 3; broker++) {
            cluster.control("start", Integer.toString(broker));
        }
    }

    @AfterAll
    static void deleteTheTopics() throws Exception {
        try (Admin admin = admin()) {
            admin.deleteTopics(List.of(TOPIC, DEAD_LETTERS)).all().get(60, TimeUnit.SECONDS);
        }
    }

    @Test
    void theBrokerCoordinatingTheGroupKilledMidStreamLosesNoEffectAndDoublesNone() throws Exception {
        streamThrough(() -> cluster.control("kill", Integer.toString(coordinatorOfTheGroup())));
    }

    @Test
    void theBrokerCoordinatingTheGroupCutOffForTwentySecondsThenHealedLosesNoEffectAndDoublesNone() throws Exception {
        streamThrough(() -> {
            cluster.control("cut", Integer.toString(coordinatorOfTheGroup()));
            LockSupport.parkNanos(CUT.toNanos());
            cluster.control("heal");
        });
    }

    /**
     * Streams events to the service at a steady pace, makes the fault once the service has applied the first ones,
     * stops the stream once the fault is over, and checks what the service did with every event it was sent.
     */
    private void streamThrough(Fault fault) throws Exception {
        AtomicBoolean streaming = new AtomicBoolean(true);
        CompletableFuture<List<UUID>> published = CompletableFuture.supplyAsync(() -> publishUntil(streaming));
        try {
            await().atMost(Duration.ofSeconds(90)).until(() -> effects() >= BEFORE_THE_FAULT);
            fault.make();
        } finally {
            streaming.set(false);
        }

        assertThat(published).succeedsWithin(Duration.ofMinutes(3));
        List<UUID> sent = published.get();
        await().atMost(Duration.ofMinutes(3))
                .untilAsserted(() -> assertThat(effects()).isEqualTo(sent.size()));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM (SELECT thing_id FROM thing_effect GROUP BY thing_id HAVING count(*) > 1)"
                                + " AS doubled",
                        Integer.class))
                .as("events applied more than once")
                .isZero();
        assertThat(new HashSet<>(this.jdbcTemplate.queryForList("SELECT thing_id FROM thing_effect", UUID.class)))
                .as("the things of the events sent")
                .containsExactlyInAnyOrderElementsOf(sent);
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(lag())
                        .as("records the group has not committed")
                        .isZero());
        assertThat(records(DEAD_LETTERS)).as("valid events dead-lettered").isZero();
    }

    /** What a test does to the cluster: returns once it is over. */
    @FunctionalInterface
    private interface Fault {
        void make() throws Exception;
    }

    private int effects() {
        Integer count =
                this.jdbcTemplate.queryForObject("SELECT count(DISTINCT thing_id) FROM thing_effect", Integer.class);
        return count != null ? count : 0;
    }

    /**
     * Publishes events, {@value #PER_BATCH} every 200 ms, until told to stop, as a producer's relay would: idempotent,
     * acknowledged by every in-sync replica, and sent again (the same event id) whenever an acknowledgement did not
     * come. Returns the things of the events it sent, each acknowledged.
     */
    private static List<UUID> publishUntil(AtomicBoolean streaming) {
        Map<String, Object> properties = Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                cluster.brokers(),
                ProducerConfig.ACKS_CONFIG,
                "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                true,
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG,
                30_000,
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
                10_000);
        List<UUID> things = new ArrayList<>();
        try (KafkaProducer<String, byte[]> producer =
                new KafkaProducer<>(properties, new StringSerializer(), new ByteArraySerializer())) {
            List<EventEnvelope<ThingHappened>> batch = new ArrayList<>();
            while (streaming.get() || !batch.isEmpty()) {
                if (batch.isEmpty()) {
                    for (int i = 0; i < PER_BATCH; i++) {
                        batch.add(Things.thingHappened());
                    }
                    LockSupport.parkNanos(PACE.toNanos());
                }
                List<Future<?>> acknowledgements = new ArrayList<>();
                for (EventEnvelope<ThingHappened> event : batch) {
                    acknowledgements.add(producer.send(new ProducerRecord<>(
                            TOPIC, event.payload().thingId().toString(), CODEC.encode(event))));
                }
                try {
                    for (Future<?> acknowledgement : acknowledgements) {
                        acknowledgement.get(60, TimeUnit.SECONDS);
                    }
                    batch.forEach(event -> things.add(event.payload().thingId()));
                    batch.clear();
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(ex);
                } catch (Exception ex) {
                    // Not acknowledged in time: the batch goes again, to the partitions' new leaders.
                    LockSupport.parkNanos(Duration.ofMillis(500).toNanos());
                }
            }
        }
        return things;
    }

    private static Admin admin() {
        return Admin.create(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.brokers(),
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000));
    }

    /**
     * The broker (1, 2 or 3: its node id) that coordinates the service's group: the one its offsets go to, and, as
     * each of the three leads a partition of the topic, the leader of one.
     */
    private static int coordinatorOfTheGroup() throws Exception {
        try (Admin admin = admin()) {
            return admin.describeConsumerGroups(List.of(GROUP))
                    .all()
                    .get(60, TimeUnit.SECONDS)
                    .get(GROUP)
                    .coordinator()
                    .id();
        }
    }

    /** The records of the topic's partitions past what the group committed. */
    private static long lag() throws Exception {
        try (Admin admin = admin()) {
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(GROUP)
                    .partitionsToOffsetAndMetadata()
                    .get(60, TimeUnit.SECONDS);
            Map<TopicPartition, OffsetSpec> ends = admin
                    .describeTopics(List.of(TOPIC))
                    .allTopicNames()
                    .get(60, TimeUnit.SECONDS)
                    .get(TOPIC)
                    .partitions()
                    .stream()
                    .collect(Collectors.toMap(
                            partition -> new TopicPartition(TOPIC, partition.partition()),
                            partition -> OffsetSpec.latest()));
            return admin.listOffsets(ends).all().get(60, TimeUnit.SECONDS).entrySet().stream()
                    .mapToLong(end -> {
                        OffsetAndMetadata at = committed.get(end.getKey());
                        return end.getValue().offset() - (at != null ? at.offset() : 0);
                    })
                    .sum();
        }
    }

    /** The records a topic holds, from its partitions' offsets. */
    private static long records(String topic) throws Exception {
        try (Admin admin = admin()) {
            Map<TopicPartition, OffsetSpec> ends = Map.of(new TopicPartition(topic, 0), OffsetSpec.latest());
            return admin.listOffsets(ends).all().get(60, TimeUnit.SECONDS).values().stream()
                    .mapToLong(end -> end.offset())
                    .sum();
        }
    }
}
