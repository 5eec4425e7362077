package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestKafkaCluster;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
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
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionTemplate;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The outbox relay on a three-broker Kafka (infra/cluster.sh), given every broker's address, while 2,000 events of 100
 * keys are emitted: the broker leading a partition of its topic is killed ({@code kill -9}), or two brokers of the
 * three are killed for 25 s, so that no partition has the two in-sync replicas {@code acks=all} needs, and started
 * again. Every event is published, no row counts an attempt or is parked, and each key's events first reach the topic
 * in the order they were emitted. The producer gives a record up after 10 s ({@code delivery.timeout.ms}), so that the
 * relay sees the brokers' absence rather than the producer waiting it out. The cluster is {@code KAFKA_CLUSTER} and
 * {@code KAFKA_CLUSTER_CONTROL}, as for the guard's Kafka cluster test.
 */
@DirtiesContext
@SpringBootTest(
        classes = OutboxRelayThroughBrokerLossesOnKafkaClusterIT.Service.class,
        properties = {"spring.cloud.stream.default-binder=kafka", "spring.cloud.function.definition="})
@EnableIdempotencyTestKit(testBinder = false)
@Tag("kafka")
@EnabledIfEnvironmentVariable(named = "KAFKA_CLUSTER", matches = ".+")
@SharedServers.Alone(SharedServers.Server.KAFKA_CLUSTER)
class OutboxRelayThroughBrokerLossesOnKafkaClusterIT {

    /** A service that emits, and consumes nothing. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    private static final int KEYS = 100;

    private static final int EVENTS_PER_KEY = 20;

    private static final TestKafkaCluster cluster = TestKafkaCluster.fromEnvironment();

    private static final String RUN =
            Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private static final String TOPIC = "relay-broker-losses." + RUN;

    /**
     * A topic whose partition n lives on broker n + 1 alone (no dot in its name: its binding's properties are set by
     * name).
     */
    private static final String STUCK_TOPIC = "relay-stuck-partition-" + RUN;

    /** How long the two brokers stay away. */
    private static final Duration AWAY = Duration.ofSeconds(25);

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("relayleaderloss").registerDataSource(registry);
        cluster.registerBinder(registry);
        registry.add("idempotency.outbox.destination", () -> TOPIC);
        String producer = "spring.cloud.stream.kafka.binder.producer-properties.";
        registry.add(producer + "delivery.timeout.ms", () -> "10000");
        registry.add(producer + "request.timeout.ms", () -> "5000");
        registry.add(producer + "linger.ms", () -> "0");
        // Kafka's defaults for the topic whose partition loses its only broker: a send to it waits two minutes.
        String stuck = "spring.cloud.stream.kafka.bindings." + STUCK_TOPIC + ".producer.configuration.";
        registry.add(stuck + "delivery.timeout.ms", () -> "120000");
        registry.add(stuck + "request.timeout.ms", () -> "30000");
    }

    @BeforeAll
    static void topic() throws Exception {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(
                            new NewTopic(TOPIC, 3, (short) 3),
                            new NewTopic(STUCK_TOPIC, Map.of(0, List.of(1), 1, List.of(2), 2, List.of(3)))
                                    .configs(Map.of(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG, "1"))))
                    .all()
                    .get(60, TimeUnit.SECONDS);
        }
    }

    @BeforeEach
    void noRowYet() {
        this.jdbcTemplate.update("DELETE FROM outbox_event");
    }

    @AfterEach
    void everyBrokerBack() {
        for (int broker = 1; broker <= 3; broker++) {
            cluster.control("start", Integer.toString(broker));
        }
    }

    @AfterAll
    static void deleteTheTopic() throws Exception {
        try (Admin admin = admin()) {
            admin.deleteTopics(List.of(TOPIC, STUCK_TOPIC)).all().get(60, TimeUnit.SECONDS);
        }
    }

    @Autowired
    Outbox outbox;

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void theBrokerLeadingAPartitionKilledMidStreamLosesNoEventAndKeepsEachKeysOrder() throws Exception {
        emitThrough("leader-killed", () -> cluster.control("kill", Integer.toString(leaderOfTheFirstPartition())));
    }

    @Test
    void twoBrokersOfThreeGoneForTwentyFiveSecondsParkNothingAndEachKeyIsPublishedInOrderOnceTheyAreBack()
            throws Exception {
        emitThrough("two-gone", () -> {
            int leader = leaderOfTheFirstPartition();
            int another = leader % 3 + 1;
            cluster.control("kill", Integer.toString(leader));
            cluster.control("kill", Integer.toString(another));
            await().during(AWAY)
                    .atMost(AWAY.plusSeconds(30))
                    .until(() -> this.jdbcTemplate.queryForObject(
                                    "SELECT count(*) FROM outbox_event WHERE parked_at IS NOT NULL", Integer.class)
                            == 0);
            cluster.control("start", Integer.toString(leader));
            cluster.control("start", Integer.toString(another));
        });
    }

    /**
     * A partition whose only broker is killed takes no record for two minutes (the producer's {@code
     * delivery.timeout.ms}): the relay's sends to it wait. The keys of the other partitions are published all the same,
     * at once and again for the events emitted next; the keys of the stuck partition count no attempt, park nothing,
     * hold no sender thread each run, and are published in order once the broker is back.
     */
    @Test
    void aPartitionWhoseOnlyBrokerIsKilledHoldsItsOwnKeysAndNoOther() throws Exception {
        List<String> keys = new ArrayList<>();
        Set<String> stuck = new HashSet<>();
        for (int n = 0; n < 30; n++) {
            String key = "stuck-" + n;
            keys.add(key);
            if (BuiltInPartitioner.partitionForKey(key.getBytes(StandardCharsets.UTF_8), 3) == 0) {
                stuck.add(key);
            }
        }
        assertThat(stuck).as("keys of partition 0, on broker 1").isNotEmpty().hasSizeLessThan(keys.size());
        int others = (keys.size() - stuck.size()) * 5;
        cluster.control("kill", "1");

        emitTo(STUCK_TOPIC, keys, 0, 5);
        await().atMost(Duration.ofSeconds(15))
                .untilAsserted(() -> assertThat(publishedOf(STUCK_TOPIC)).isEqualTo(others));
        emitTo(STUCK_TOPIC, keys, 5, 10);
        await().atMost(Duration.ofSeconds(15))
                .untilAsserted(() -> assertThat(publishedOf(STUCK_TOPIC)).isEqualTo(2 * others));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregatetype = ? AND (attempts > 0 OR parked_at IS NOT"
                                + " NULL)",
                        Integer.class,
                        STUCK_TOPIC))
                .as("rows that counted an attempt, or were parked")
                .isZero();
        assertThat(Thread.getAllStackTraces().entrySet().stream()
                        .filter(thread -> thread.getKey().getName().startsWith("idempotency-outbox-sender-"))
                        // An idle thread of the pool waits for a send in the pool's hand-off queue.
                        .filter(thread -> Arrays.stream(thread.getValue())
                                .noneMatch(frame -> frame.getClassName().contains("SynchronousQueue"))))
                .as("the relay's threads with a send under way: one per key of the stuck partition, and the run's own")
                .hasSizeLessThanOrEqualTo(stuck.size() + OutboxSender.MAX_IN_FLIGHT);

        cluster.control("start", "1");
        await().atMost(Duration.ofMinutes(3))
                .untilAsserted(() -> assertThat(publishedOf(STUCK_TOPIC)).isEqualTo(keys.size() * 10));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE attempts > 0 OR parked_at IS NOT NULL", Integer.class))
                .isZero();
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() ->
                        assertThat(readFirstArrivals(STUCK_TOPIC, "stuck-")).isEqualTo(keys.size() * 10));
        assertThat(this.firstArrivals.values())
                .as("each key's events, in the order they first reached the topic")
                .hasSize(keys.size())
                .allSatisfy(sequence -> assertThat(sequence).isSorted().hasSize(10));
    }

    /** Emits the events numbered {@code from} to {@code to} (excluded) of each key, a transaction per number. */
    private void emitTo(String topic, List<String> keys, int from, int to) {
        for (int n = from; n < to; n++) {
            int sequence = n;
            this.transactions.executeWithoutResult(status -> this.outbox.write(
                    topic,
                    keys.stream()
                            .map(key ->
                                    new OutgoingEvent("test.thing.noticed.v1", key, Map.of("key", key, "n", sequence)))
                            .toList()));
        }
    }

    /**
     * Emits {@value #EVENTS_PER_KEY} events of each of {@value #KEYS} keys (named after the test) over about ten
     * seconds, makes the fault once a quarter is published, and checks what the relay did with every row.
     */
    private void emitThrough(String test, Fault fault) throws Exception {
        CompletableFuture<Void> emitting = CompletableFuture.runAsync(() -> {
            for (int n = 0; n < EVENTS_PER_KEY; n++) {
                int sequence = n;
                // Ten keys a transaction, as a service emitting in its effects' transactions would.
                for (int first = 0; first < KEYS; first += 10) {
                    int from = first;
                    // Spread over about ten seconds, so that the fault comes while the relay publishes.
                    LockSupport.parkNanos(Duration.ofMillis(50).toNanos());
                    this.transactions.executeWithoutResult(status -> {
                        for (int key = from; key < from + 10; key++) {
                            String name = test + "-" + key;
                            this.outbox.emit("test.thing.noticed.v1", name, Map.of("key", name, "n", sequence));
                        }
                    });
                }
            }
        });
        await().atMost(Duration.ofSeconds(60)).until(() -> published() >= KEYS * EVENTS_PER_KEY / 4);
        fault.make();

        assertThat(emitting).succeedsWithin(Duration.ofMinutes(1));
        await().atMost(Duration.ofMinutes(3))
                .untilAsserted(() -> assertThat(published()).isEqualTo(KEYS * EVENTS_PER_KEY));
        assertThat(this.jdbcTemplate.queryForList(
                        "SELECT aggregateid, attempts, parked_at, last_error FROM outbox_event"
                                + " WHERE attempts > 0 OR parked_at IS NOT NULL"))
                .as("rows that counted an attempt, or were parked")
                .isEmpty();
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(
                        () -> assertThat(readFirstArrivals(TOPIC, test + "-")).isEqualTo(KEYS * EVENTS_PER_KEY));
        assertThat(this.firstArrivals).hasSize(KEYS);
        assertThat(this.firstArrivals.values())
                .as("each key's events, in the order they first reached the topic")
                .allSatisfy(sequence -> assertThat(sequence).isSorted().hasSize(EVENTS_PER_KEY));
    }

    /** What a test does to the cluster: returns once it is over. */
    @FunctionalInterface
    private interface Fault {
        void make() throws Exception;
    }

    private int published() {
        return publishedOf(TOPIC);
    }

    private int publishedOf(String topic) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM outbox_event WHERE aggregatetype = ? AND published_at IS NOT NULL",
                Integer.class,
                topic);
        return count != null ? count : 0;
    }

    /** Each key's event numbers, in the order each event id first arrived (a copy sent again counts once). */
    private final Map<String, List<Integer>> firstArrivals = new HashMap<>();

    private final Set<String> arrived = new HashSet<>();

    /**
     * Reads a topic from its beginning into {@link #firstArrivals} (afresh each time), for the keys of the prefix
     * (the test's); returns how many distinct events of theirs it holds.
     */
    private int readFirstArrivals(String topic, String keys) throws Exception {
        this.firstArrivals.clear();
        this.arrived.clear();
        JsonMapper json = JsonMapper.builder().build();
        Map<String, Object> properties = Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                cluster.brokers(),
                ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                "read_committed");
        try (KafkaConsumer<String, byte[]> consumer =
                new KafkaConsumer<>(properties, new StringDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(partition -> new TopicPartition(topic, partition.partition()))
                    .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            while (partitions.stream().anyMatch(partition -> consumer.position(partition) < ends.get(partition))) {
                for (ConsumerRecord<String, byte[]> record : consumer.poll(Duration.ofSeconds(1))) {
                    JsonNode envelope = json.readTree(new String(record.value(), StandardCharsets.UTF_8));
                    JsonNode payload = envelope.path("payload");
                    if (payload.path("key").asString().startsWith(keys)
                            && this.arrived.add(envelope.path("event_id").asString())) {
                        this.firstArrivals
                                .computeIfAbsent(payload.path("key").asString(), any -> new ArrayList<>())
                                .add(payload.path("n").asInt());
                    }
                }
            }
        }
        return this.arrived.size();
    }

    private static Admin admin() {
        return Admin.create(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.brokers(),
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000));
    }

    /** The broker (1, 2 or 3: its node id) that leads the topic's first partition. */
    private static int leaderOfTheFirstPartition() throws Exception {
        try (Admin admin = admin()) {
            return admin.describeTopics(List.of(TOPIC))
                    .allTopicNames()
                    .get(60, TimeUnit.SECONDS)
                    .get(TOPIC)
                    .partitions()
                    .get(0)
                    .leader()
                    .id();
        }
    }
}
