package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import tools.jackson.databind.JsonNode;

/**
 * The relays of several instances of a service, each a process of its own, share one outbox on a real PostgreSQL and
 * RabbitMQ while events are written, and one is killed with {@code kill -9} in the middle of the stream: every event is
 * published, and the consumer sees each key's events first in the order they were written (the copies a killed
 * relay's rows get are allowed, and discarded by a guard).
 */
class OutboxRelaysAcrossProcessesIT {

    /** An instance of a service that only emits: its relay publishes the schema's outbox. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Instance {

        public static void main(String[] args) {
            new SpringApplicationBuilder(Instance.class)
                    .web(WebApplicationType.NONE)
                    .run(args);
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EVENT = "test.thing.noticed.v1";

    private static final int KEYS = 50;

    private static final int EVENTS = 3_000;

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @ParameterizedTest(name = "{0} instances")
    @ValueSource(ints = {2, 3})
    void everyEventIsPublishedInOrderPerKeyWhenOneOfTheRelaysIsKilledMidStream(int instances) throws Exception {
        TestDatabase database = TestPostgres.newDatabase("outboxrelays");
        String exchange = rabbit.topicExchange("outbox-relays");
        String queue = rabbit.uniqueName("outbox-relays-received");
        List<Process> processes = new ArrayList<>();
        try (Connection connection = rabbit.newConnection()) {
            Channel channel = connection.createChannel();
            channel.queueDeclare(queue, true, false, false, Map.of());
            channel.queueBind(queue, exchange, "#");
            Received received = new Received(channel);
            channel.basicConsume(queue, true, received);

            for (int n = 0; n < instances; n++) {
                processes.add(start(database, exchange, n));
            }
            JdbcTemplate jdbc = new JdbcTemplate(
                    new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));
            awaitInstancesStarted(instances);
            for (int written = 0; written < EVENTS; written += 50) {
                int first = written;
                jdbc.batchUpdate(
                        "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)"
                                + " VALUES (?, ?, ?, ?, ?::jsonb)",
                        IntStream.range(first, first + 50).boxed().toList(),
                        50,
                        (statement, n) -> {
                            statement.setObject(1, UuidV7.generate());
                            statement.setString(2, exchange);
                            statement.setString(3, "key-" + (n % KEYS));
                            statement.setString(4, EVENT);
                            statement.setString(5, "{\"n\": %d}".formatted(n));
                        });
                if (written == EVENTS / 3) {
                    processes.get(0).destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
                TimeUnit.MILLISECONDS.sleep(10);
            }

            await().atMost(Duration.ofSeconds(120))
                    .alias("every event reaches the consumer")
                    .until(() -> received.distinct() == EVENTS);
            Map<String, List<Integer>> firstSeen = received.firstSeenPerKey();
            assertThat(firstSeen).hasSize(KEYS);
            firstSeen.forEach((key, events) -> assertThat(events)
                    .as("the events of %s, in the order the consumer first saw them", key)
                    .isSorted()
                    .hasSize(EVENTS / KEYS));
            assertThat(jdbc.queryForObject(
                            "SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class))
                    .isZero();
        } finally {
            processes.forEach(Process::destroyForcibly);
        }
    }

    /** Starts an instance as a process of its own, from this test's class path. */
    private static Process start(TestDatabase database, String exchange, int n) throws IOException {
        Path log = Path.of("target", "outbox-relay-instance-" + n + ".log");
        Files.createDirectories(log.getParent());
        List<String> command = List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1",
                "-cp",
                System.getProperty("java.class.path"),
                Instance.class.getName(),
                "--spring.datasource.url=" + database.jdbcUrl(),
                "--spring.datasource.username=" + database.username(),
                "--spring.datasource.password=" + database.password(),
                "--spring.rabbitmq.host=" + rabbit.host(),
                "--spring.rabbitmq.port=" + rabbit.port(),
                "--spring.rabbitmq.username=" + rabbit.username(),
                "--spring.rabbitmq.password=" + rabbit.password(),
                "--spring.cloud.stream.default-binder=rabbit",
                "--spring.cloud.function.definition=",
                "--idempotency.outbox.destination=" + exchange,
                "--idempotency.outbox.relay.poll-interval=100ms",
                "--idempotency.outbox.relay.batch-size=100",
                "--spring.main.banner-mode=off",
                // Nothing but the relay's daemon thread would keep it running.
                "--spring.main.keep-alive=true");
        return new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
    }

    private static void awaitInstancesStarted(int instances) {
        await().atMost(Duration.ofSeconds(120))
                .alias("every instance's relay runs")
                .until(() -> IntStream.range(0, instances).allMatch(n -> {
                    try {
                        return Files.readString(Path.of("target", "outbox-relay-instance-" + n + ".log"))
                                .contains("Relaying the outbox");
                    } catch (IOException ex) {
                        return false;
                    }
                }));
    }

    /** What the consumer received, in order. */
    private static final class Received extends DefaultConsumer {

        private final List<EventEnvelope<JsonNode>> events = Collections.synchronizedList(new ArrayList<>());

        Received(Channel channel) {
            super(channel);
        }

        @Override
        public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
            this.events.add(CODEC.decode(body));
        }

        long distinct() {
            synchronized (this.events) {
                return this.events.stream()
                        .map(EventEnvelope::eventId)
                        .distinct()
                        .count();
            }
        }

        /** Each key's events (their n), in the order the consumer saw them first. */
        Map<String, List<Integer>> firstSeenPerKey() {
            Map<String, List<Integer>> perKey = new LinkedHashMap<>();
            synchronized (this.events) {
                this.events.stream()
                        .map(event -> event.payload().get("n").asInt())
                        .distinct()
                        .forEach(n -> perKey.computeIfAbsent("key-" + (n % KEYS), key -> new ArrayList<>())
                                .add(n));
            }
            return perKey;
        }
    }
}
