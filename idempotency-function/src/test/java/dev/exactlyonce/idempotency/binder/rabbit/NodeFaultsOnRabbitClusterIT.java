package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.MessageProperties;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A guarded service on a three-node RabbitMQ 4 cluster (infra/cluster.sh), its queue a quorum queue of three members,
 * given every node's address: the node that leads its queue is killed ({@code kill -9}) while 2,000 events stream
 * in. Every event's effect is applied once, nothing is dead-lettered, and nothing is left in the queue. The cluster
 * is {@code RABBITMQ_CLUSTER} (its addresses) and {@code RABBITMQ_CLUSTER_CONTROL} (the command that kills and
 * starts its nodes, {@code infra/cluster.sh rabbitmq}); {@code .ci/run} starts it and sets both.
 */
@SpringBootTest(
        classes = QueueLeaderKilledOnRabbitClusterIT.Service.class,
        properties = "spring.cloud.stream.default-binder=rabbit")
@EnableIdempotencyTestKit(testBinder = false)
@EnabledIfEnvironmentVariable(named = "RABBITMQ_CLUSTER", matches = ".+")
class QueueLeaderKilledOnRabbitClusterIT {

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

    private static final int EVENTS = 2_000;

    private static final TestRabbitCluster cluster = TestRabbitCluster.fromEnvironment();

    private static final String RUN =
            Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private static final String DESTINATION = "leader-killed." + RUN;

    private static final String QUEUE = DESTINATION + ".things";

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    private static final List<Integer> killed = new ArrayList<>();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("leaderkilled").registerDataSource(registry);
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

    @AfterAll
    static void startTheKilledNodesAgainAndDeleteTheQueues() throws Exception {
        for (int node : killed) {
            cluster.control("start", Integer.toString(node));
        }
        try (Connection connection = cluster.newConnection()) {
            Channel channel = connection.createChannel();
            channel.queueDelete(QUEUE);
            channel.queueDelete(QUEUE + ".dlq");
            channel.exchangeDelete(DESTINATION);
        }
    }

    @Test
    void theNodeLeadingTheQueueKilledMidStreamLosesNoEffectAndDoublesNone() throws Exception {
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        for (int i = 0; i < EVENTS; i++) {
            events.add(Things.thingHappened());
        }
        CompletableFuture<Void> publishing = CompletableFuture.runAsync(() -> publishAll(events));

        await().atMost(Duration.ofSeconds(60)).until(() -> effects() >= EVENTS / 4);
        int leader = leaderOf(QUEUE);
        killed.add(leader);
        cluster.control("kill", Integer.toString(leader));

        assertThat(publishing).succeedsWithin(Duration.ofMinutes(3));
        await().atMost(Duration.ofMinutes(3))
                .untilAsserted(() -> assertThat(effects()).isEqualTo(EVENTS));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM (SELECT thing_id FROM thing_effect GROUP BY thing_id HAVING count(*) > 1)"
                                + " AS doubled",
                        Integer.class))
                .as("events applied more than once")
                .isZero();
        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(() -> assertThat(messagesIn(QUEUE))
                        .as("messages left in the queue, ready or unacknowledged")
                        .isZero());
        assertThat(messagesIn(QUEUE + ".dlq")).as("valid events dead-lettered").isZero();
    }

    private int effects() {
        Integer count =
                this.jdbcTemplate.queryForObject("SELECT count(DISTINCT thing_id) FROM thing_effect", Integer.class);
        return count != null ? count : 0;
    }

    /**
     * Publishes every event as a producer's relay would: confirmed, and sent again (the same event id) whenever a
     * confirm did not come, through whichever node still answers.
     */
    private static void publishAll(List<EventEnvelope<ThingHappened>> events) {
        int next = 0;
        while (next < events.size()) {
            try (Connection connection = cluster.newConnection()) {
                Channel channel = connection.createChannel();
                channel.confirmSelect();
                while (next < events.size()) {
                    int end = Math.min(next + 50, events.size());
                    for (EventEnvelope<ThingHappened> event : events.subList(next, end)) {
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
                    next = end;
                }
            } catch (IOException | TimeoutException | RuntimeException | InterruptedException ex) {
                if (ex instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(ex);
                }
                // The node went: the unconfirmed part of the group goes again, through another node.
                LockSupport.parkNanos(Duration.ofMillis(500).toNanos());
            }
        }
    }

    /** The node (1, 2 or 3) whose member leads the quorum queue. */
    private static int leaderOf(String queue) throws Exception {
        String leaders = cluster.control("ctl", "1", "-q", "list_queues", "name", "leader", "--no-table-headers");
        Matcher leader =
                Pattern.compile(Pattern.quote(queue) + "\\s+rabbit@rmq(\\d)").matcher(leaders);
        assertThat(leader.find()).as("the leader of %s in %s", queue, leaders).isTrue();
        return Integer.parseInt(leader.group(1));
    }

    /** The queue's messages, ready or unacknowledged, as a node still running counts them. */
    private static int messagesIn(String queue) throws Exception {
        String node = List.of("1", "2", "3").stream()
                .filter(candidate -> !killed.contains(Integer.parseInt(candidate)))
                .findFirst()
                .orElseThrow();
        String counts = cluster.control("ctl", node, "-q", "list_queues", "name", "messages", "--no-table-headers");
        Matcher messages =
                Pattern.compile("(?m)^" + Pattern.quote(queue) + "\\s+(\\d+)$").matcher(counts);
        assertThat(messages.find()).as("the queue %s in %s", queue, counts).isTrue();
        return Integer.parseInt(messages.group(1));
    }
}
