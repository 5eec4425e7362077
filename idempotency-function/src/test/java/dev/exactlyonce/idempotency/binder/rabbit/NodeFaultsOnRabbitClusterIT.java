package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.MessageProperties;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
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
 * A guarded service on a three-node RabbitMQ 4 cluster (infra/cluster.sh), its queue a quorum queue of three members,
 * given every node's address, while events stream in: the node that leads its queue is killed ({@code kill -9}); the
 * node the service consumes through is cut off from the other nodes and from the service for a minute, then healed;
 * every node is restarted in turn.
 * Every event's effect is applied once, nothing is dead-lettered, and nothing is left in the queue. The cluster pauses
 * a minority ({@code pause_minority}): the node cut off stops serving, and its clients go to the other two, where the
 * queue elects a new leader. The cluster is {@code RABBITMQ_CLUSTER} (its addresses) and
 * {@code RABBITMQ_CLUSTER_CONTROL} (the command that acts on its nodes, {@code infra/cluster.sh rabbitmq});
 * {@code .ci/run} starts it and sets both.
 */
@SpringBootTest(
        classes = NodeFaultsOnRabbitClusterIT.Service.class,
        properties = "spring.cloud.stream.default-binder=rabbit")
@EnableIdempotencyTestKit(testBinder = false)
@EnabledIfEnvironmentVariable(named = "RABBITMQ_CLUSTER", matches = ".+")
// Closed with the class: its consumers would otherwise go on through the nodes the next cluster test kills.
@DirtiesContext
@SharedServers.Alone(SharedServers.Server.RABBITMQ_CLUSTER)
class NodeFaultsOnRabbitClusterIT {

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

    /** How long a node stays cut off. */
    private static final Duration CUT = Duration.ofSeconds(60);

    /** Events published before the fault, and the stream's pace: 20 events every 200 ms. */
    private static final int BEFORE_THE_FAULT = 500;

    private static final int PER_BATCH = 20;

    private static final Duration PACE = Duration.ofMillis(200);

    private static final TestRabbitCluster cluster = TestRabbitCluster.fromEnvironment();

    private static final String RUN =
            Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private static final String DESTINATION = "node-faults." + RUN;

    private static final String QUEUE = DESTINATION + ".things";

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    /** The nodes a fault has taken away (killed, or cut off), which neither publish nor answer the test's questions. */
    private final Set<Integer> away = new HashSet<>();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("nodefaults").registerDataSource(registry);
        cluster.registerConnection(registry);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".destination", () -> DESTINATION);
        registry.add("spring.cloud.stream.bindings." + BINDING + ".group", () -> "things");
        String rabbit = "spring.cloud.stream.rabbit.bindings." + BINDING + ".consumer.";
        registry.add(rabbit + "quorum.enabled", () -> "true");
        registry.add(rabbit + "dlq-quorum.enabled", () -> "true");
        registry.add(rabbit + "recovery-interval", () -> "1000");
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @BeforeEach
    void noEffectYet() {
        // The test before left its queue empty (it asserted it): its effects are none of this one's.
        this.jdbcTemplate.update("DELETE FROM thing_effect");
    }

    @AfterEach
    void everyNodeBackInTheCluster() {
        cluster.control("heal");
        for (int node = 1; node <= 3; node++) {
            cluster.control("start", Integer.toString(node));
        }
        this.away.clear();
    }

    @AfterAll
    static void deleteTheQueues() throws Exception {
        try (Connection connection = cluster.newConnection()) {
            Channel channel = connection.createChannel();
            channel.queueDelete(QUEUE);
            channel.queueDelete(QUEUE + ".dlq");
            channel.exchangeDelete(DESTINATION);
        }
    }

    @Test
    void theNodeLeadingTheQueueKilledMidStreamLosesNoEffectAndDoublesNone() throws Exception {
        streamThrough(() -> {
            int leader = cluster.leaderOf(QUEUE, answeringNode());
            this.away.add(leader);
            cluster.control("kill", Integer.toString(leader));
        });
    }

    @Test
    void theNodeTheServiceConsumesThroughCutOffForAMinuteThenHealedLosesNoEffectAndDoublesNone() throws Exception {
        streamThrough(() -> {
            // What the service applied there and had not acknowledged is delivered again, through another node.
            int node = nodeOfTheServicesConnection();
            this.away.add(node);
            cluster.control("cut", Integer.toString(node));
            LockSupport.parkNanos(CUT.toNanos());
            cluster.control("heal");
            // Paused while it was cut off (pause_minority), it answers once it has rejoined the other two.
            cluster.control("start", Integer.toString(node));
            this.away.remove(node);
        });
    }

    @Test
    void everyNodeRestartedInTurnMidStreamLosesNoEffectAndDoublesNone() throws Exception {
        streamThrough(() -> {
            for (int node = 1; node <= 3; node++) {
                // Each waits until the quorum queues keep a majority without it, stops, and starts again.
                this.away.add(node);
                cluster.control("restart", Integer.toString(node));
                this.away.remove(node);
            }
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
            await().atMost(Duration.ofSeconds(60)).until(() -> effects() >= BEFORE_THE_FAULT);
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
                .hasSize(sent.size());
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(messagesIn(QUEUE))
                        .as("messages left in the queue, ready or unacknowledged")
                        .isZero());
        assertThat(messagesIn(QUEUE + ".dlq")).as("valid events dead-lettered").isZero();
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
     * Publishes events, {@value #PER_BATCH} every 200 ms, until told to stop, as a producer's relay would: confirmed,
     * and sent again (the same event id) whenever a confirm did not come, through whichever node still answers.
     * Returns the things of the events it sent, each confirmed.
     */
    private static List<UUID> publishUntil(AtomicBoolean streaming) {
        List<UUID> things = new ArrayList<>();
        List<EventEnvelope<ThingHappened>> batch = new ArrayList<>();
        while (streaming.get() || !batch.isEmpty()) {
            Connection connection = null;
            try {
                connection = cluster.newConnection();
                Channel channel = connection.createChannel();
                channel.confirmSelect();
                while (streaming.get() || !batch.isEmpty()) {
                    if (batch.isEmpty()) {
                        for (int i = 0; i < PER_BATCH; i++) {
                            batch.add(Things.thingHappened());
                        }
                        LockSupport.parkNanos(PACE.toNanos());
                    }
                    for (EventEnvelope<ThingHappened> event : batch) {
                        channel.basicPublish(
                                DESTINATION,
                                event.eventName(),
                                MessageProperties.PERSISTENT_BASIC
                                        .builder()
                                        .contentType("application/json")
                                        .messageId(event.eventId().toString())
                                        .build(),
                                CODEC.encode(event));
                    }
                    channel.waitForConfirmsOrDie(10_000);
                    batch.forEach(event -> things.add(event.payload().thingId()));
                    batch.clear();
                }
                connection.close();
            } catch (IOException | TimeoutException | RuntimeException | InterruptedException ex) {
                if (ex instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(ex);
                }
                // The node went (or answers no more): the unconfirmed batch goes again, through another node.
                if (connection != null) {
                    connection.abort(1_000);
                }
                LockSupport.parkNanos(Duration.ofMillis(500).toNanos());
            }
        }
        return things;
    }

    /** The node (1, 2 or 3) the service's connection reached: node N is 10.77.0.1N. */
    private int nodeOfTheServicesConnection() {
        String connections = ask("list_connections", "host", "client_properties");
        Matcher node = Pattern.compile("(?m)^\\d+\\.\\d+\\.\\d+\\.\\d(\\d)\\s.*rabbitConnectionFactory#")
                .matcher(connections);
        assertThat(node.find())
                .as("the service's connection in %s", connections)
                .isTrue();
        return Integer.parseInt(node.group(1));
    }

    /** The queue's messages, ready or unacknowledged. */
    private int messagesIn(String queue) {
        String counts = ask("list_queues", "name", "messages");
        Matcher messages =
                Pattern.compile("(?m)^" + Pattern.quote(queue) + "\\s+(\\d+)$").matcher(counts);
        assertThat(messages.find()).as("the queue %s in %s", queue, counts).isTrue();
        return Integer.parseInt(messages.group(1));
    }

    /** A {@code rabbitmqctl} listing, as a node the test has not taken away gives it. */
    private String ask(String... listing) {
        List<String> arguments = new ArrayList<>(List.of("ctl", Integer.toString(answeringNode()), "-q"));
        arguments.addAll(List.of(listing));
        arguments.add("--no-table-headers");
        return cluster.control(arguments.toArray(String[]::new));
    }

    /** A node the test has not taken away. */
    private int answeringNode() {
        return List.of(1, 2, 3).stream()
                .filter(candidate -> !this.away.contains(candidate))
                .findFirst()
                .orElseThrow();
    }
}
