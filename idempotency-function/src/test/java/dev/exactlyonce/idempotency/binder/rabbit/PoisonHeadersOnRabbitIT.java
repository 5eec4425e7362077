package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.spi.IThrowableProxy;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A message whose headers the consumer's client cannot read, on a real RabbitMQ quorum queue: a table nested thousands
 * of levels deep (any publisher that reaches the queue can send one; the broker takes it). The client fails on it
 * before any code of the service runs and closes the connection; the quorum queue returns the message to the head of
 * the queue each time. With a client that bounds the nesting (amqp-client 5.33.1 and later) and a delivery limit on
 * the queue, the broker dead-letters it after that many returns and the events behind it are applied.
 */
@SpringBootTest(classes = PoisonHeadersOnRabbitIT.Service.class, properties = "spring.config.name=minimal-service")
@EnableIdempotencyTestKit(testBinder = false)
class PoisonHeadersOnRabbitIT {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.topicExchange("poison");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    private static final String RABBIT_BINDING =
            "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.";

    /** Levels of nesting: over what a 1 MiB thread stack holds when a client reads them recursively. */
    private static final int LEVELS = 3_000;

    @DynamicPropertySource
    static void service(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("poison").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
        registry.add(RABBIT_BINDING + "quorum.enabled", () -> "true");
        registry.add(RABBIT_BINDING + "quorum.delivery-limit", () -> "3");
        registry.add(RABBIT_BINDING + "dlq-quorum.enabled", () -> "true");
        // The connection closed by the client comes back within a second rather than the container's 5 s.
        registry.add(RABBIT_BINDING + "recovery-interval", () -> "1000");
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    @Test
    void aMessageWhoseHeadersTheClientCannotReadIsDeadLetteredAndTheEventsBehindItAreApplied() throws Exception {
        EventEnvelope<ThingHappened> poison = Things.thingHappened();
        EventEnvelope<ThingHappened> next = Things.thingHappened();

        publishNested(poison);
        rabbit.publish(DESTINATION, next);

        await().atMost(Duration.ofSeconds(90))
                .untilAsserted(() -> assertThat(amounts(next))
                        .as("the event behind the unreadable message")
                        .containsExactly(new BigDecimal("2.500")));
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                        .as("the unreadable message, dead-lettered by the broker")
                        .isEqualTo(1));
        assertThat(amounts(poison)).isEmpty();
        assertThat(this.logs.events().stream().flatMap(event -> causes(event.getThrowableProxy())))
                .as("the client refuses the headers, rather than overflowing its connection thread's stack")
                .contains("com.rabbitmq.client.MalformedFrameException")
                .doesNotContain("java.lang.StackOverflowError");
        // Not read back here: this client could not read it either.
        rabbit.purge(QUEUE + ".dlq");
    }

    /** Publishes the event with a header nested {@link #LEVELS} deep, from a thread whose stack can write it. */
    private static void publishNested(EventEnvelope<ThingHappened> event) throws Exception {
        Object nested = "x";
        for (int level = 0; level < LEVELS; level++) {
            nested = Map.of("a", nested);
        }
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .deliveryMode(2)
                .headers(Map.of("p", nested))
                .build();
        byte[] body = ("{\"event_id\":\"%s\",\"event_name\":\"%s\",\"occurred_at\":\"%s\",\"payload\":"
                        + "{\"thingId\":\"%s\",\"amount\":\"%s\"}}")
                .formatted(
                        event.eventId(),
                        ThingHappened.NAME,
                        event.occurredAt(),
                        event.payload().thingId(),
                        event.payload().amount())
                .getBytes(StandardCharsets.UTF_8);
        AtomicReference<Exception> failure = new AtomicReference<>();
        Thread publisher = new Thread(
                null,
                () -> {
                    try (Connection connection = rabbit.newConnection();
                            Channel channel = connection.createChannel()) {
                        channel.confirmSelect();
                        channel.basicPublish(DESTINATION, ThingHappened.NAME, properties, body);
                        channel.waitForConfirmsOrDie(10_000);
                    } catch (Exception e) {
                        failure.set(e);
                    }
                },
                "nested-header-publisher",
                256L << 20);
        publisher.start();
        publisher.join();
        if (failure.get() != null) {
            throw failure.get();
        }
    }

    private static Stream<String> causes(IThrowableProxy throwable) {
        return throwable == null
                ? Stream.empty()
                : Stream.concat(Stream.of(throwable.getClassName()), causes(throwable.getCause()));
    }

    private List<BigDecimal> amounts(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?",
                BigDecimal.class,
                event.payload().thingId());
    }
}
