package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
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
 * The outbox relay on a three-node RabbitMQ 4 cluster (infra/cluster.sh), given every node's address: the node it
 * publishes through is killed ({@code kill -9}) while 2,000 events of 100 keys are emitted. Every event is published,
 * none is parked, and each key's events first reach the consumers' quorum queue in the order they were emitted. The
 * cluster is {@code RABBITMQ_CLUSTER} and {@code RABBITMQ_CLUSTER_CONTROL}, as for the guard's cluster test.
 */
@SpringBootTest(
        classes = OutboxRelayThroughANodeLossOnRabbitClusterIT.Service.class,
        properties = {"spring.cloud.stream.default-binder=rabbit", "spring.cloud.function.definition="})
@EnableIdempotencyTestKit(testBinder = false)
@EnabledIfEnvironmentVariable(named = "RABBITMQ_CLUSTER", matches = ".+")
// Closed with the class: its consumers would otherwise go on through the nodes the next cluster test kills.
@DirtiesContext
@SharedServers.Alone(SharedServers.Server.RABBITMQ_CLUSTER)
class OutboxRelayThroughANodeLossOnRabbitClusterIT {

    /** A service that emits, and consumes nothing. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    private static final int KEYS = 100;

    private static final int EVENTS_PER_KEY = 20;

    private static final TestRabbitCluster cluster = TestRabbitCluster.fromEnvironment();

    private static final String RUN =
            Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private static final String EXCHANGE = "relay-node-loss." + RUN;

    private static final String QUEUE = EXCHANGE + ".consumers";

    private static final List<Integer> killed = new ArrayList<>();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("relaynodeloss").registerDataSource(registry);
        cluster.registerConnection(registry);
        registry.add("idempotency.outbox.destination", () -> EXCHANGE);
    }

    @BeforeAll
    static void exchangeAndQueue() throws Exception {
        try (Connection connection = cluster.newConnection()) {
            Channel channel = connection.createChannel();
            channel.exchangeDeclare(EXCHANGE, "topic", true);
            channel.queueDeclare(QUEUE, true, false, false, Map.of("x-queue-type", "quorum"));
            channel.queueBind(QUEUE, EXCHANGE, "#");
        }
    }

    @AfterAll
    static void startTheKilledNodesAgainAndDeleteTheQueue() throws Exception {
        for (int node : killed) {
            cluster.control("start", Integer.toString(node));
        }
        try (Connection connection = cluster.newConnection()) {
            Channel channel = connection.createChannel();
            channel.queueDelete(QUEUE);
            channel.exchangeDelete(EXCHANGE);
        }
    }

    @Autowired
    Outbox outbox;

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void theNodeTheRelayPublishesThroughKilledMidStreamLosesNoEventAndKeepsEachKeysOrder() throws Exception {
        CompletableFuture<Void> emitting = CompletableFuture.runAsync(() -> {
            for (int n = 0; n < EVENTS_PER_KEY; n++) {
                int sequence = n;
                // Ten keys a transaction, as a service emitting in its effects' transactions would.
                for (int first = 0; first < KEYS; first += 10) {
                    int from = first;
                    // Spread over about ten seconds, so that the node goes while the relay publishes.
                    LockSupport.parkNanos(Duration.ofMillis(50).toNanos());
                    this.transactions.executeWithoutResult(status -> {
                        for (int key = from; key < from + 10; key++) {
                            this.outbox.emit(
                                    "test.thing.noticed.v1", "key-" + key, Map.of("key", "key-" + key, "n", sequence));
                        }
                    });
                }
            }
        });
        await().atMost(Duration.ofSeconds(60)).until(() -> published() >= KEYS * EVENTS_PER_KEY / 4);
        int node = nodeOfTheRelaysConnection();
        killed.add(node);
        cluster.control("kill", Integer.toString(node));

        assertThat(emitting).succeedsWithin(Duration.ofMinutes(1));
        await().atMost(Duration.ofMinutes(3))
                .untilAsserted(() -> assertThat(published()).isEqualTo(KEYS * EVENTS_PER_KEY));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE parked_at IS NOT NULL", Integer.class))
                .as("rows parked")
                .isZero();
        // The queue answers once its members elected a leader among the nodes left.
        await().atMost(Duration.ofSeconds(60))
                .ignoreExceptions()
                .untilAsserted(() -> assertThat(drainFirstArrivals()).isEqualTo(KEYS * EVENTS_PER_KEY));
        assertThat(this.firstArrivals).hasSize(KEYS);
        assertThat(this.firstArrivals.values())
                .as("each key's events, in the order they first reached the queue")
                .allSatisfy(sequence -> assertThat(sequence).isSorted().hasSize(EVENTS_PER_KEY));
    }

    private int published() {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM outbox_event WHERE published_at IS NOT NULL", Integer.class);
        return count != null ? count : 0;
    }

    /** Each key's event numbers, in the order each event id first arrived (a copy sent again counts once). */
    private final Map<String, List<Integer>> firstArrivals = new HashMap<>();

    private final Set<String> arrived = new HashSet<>();

    /** Takes what the queue holds into {@link #firstArrivals}; returns how many distinct events arrived so far. */
    private int drainFirstArrivals() throws Exception {
        JsonMapper json = JsonMapper.builder().build();
        try (Connection connection = cluster.newConnection()) {
            Channel channel = connection.createChannel();
            for (GetResponse message = channel.basicGet(QUEUE, true);
                    message != null;
                    message = channel.basicGet(QUEUE, true)) {
                if (this.arrived.add(message.getProps().getMessageId())) {
                    JsonNode payload = json.readTree(new String(message.getBody(), StandardCharsets.UTF_8))
                            .path("payload");
                    this.firstArrivals
                            .computeIfAbsent(payload.path("key").asString(), any -> new ArrayList<>())
                            .add(payload.path("n").asInt());
                }
            }
        }
        return this.arrived.size();
    }

    /** The node (1, 2 or 3) the relay publishes through: that of the service's publisher connection. */
    private static int nodeOfTheRelaysConnection() throws Exception {
        // The address the connection reached: node N is 10.77.0.1N.
        String connections = cluster.control(
                "ctl", "1", "-q", "list_connections", "host", "client_properties", "--no-table-headers");
        Matcher node = Pattern.compile("(?m)^\\d+\\.\\d+\\.\\d+\\.\\d(\\d)\\s.*rabbitConnectionFactory\\.publisher")
                .matcher(connections);
        assertThat(node.find())
                .as("the service's publisher connection in %s", connections)
                .isTrue();
        return Integer.parseInt(node.group(1));
    }
}
