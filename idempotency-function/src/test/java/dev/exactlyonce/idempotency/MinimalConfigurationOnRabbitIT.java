package dev.exactlyonce.idempotency;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
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
 * A service configured as minimally as README's "Adopting the library" shows (the guard composed first, a destination
 * and a group, nothing else: {@code minimal-service.yml}), on a real RabbitMQ: a malformed message is never dropped,
 * it goes to a dead-letter queue the library gave the binding, with its reason, logged in one WARN line.
 */
@SpringBootTest(
        classes = MinimalConfigurationOnRabbitIT.Service.class,
        properties = "spring.config.name=minimal-service")
@EnableIdempotencyTestKit(testBinder = false)
class MinimalConfigurationOnRabbitIT {

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

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("minimal");

    private static final String GROUP = "things";

    /** The Rabbit binder's queue of the group, and its dead-letter queue. */
    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + "." + GROUP);

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("minimal").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> GROUP);
    }

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    @Test
    void aMalformedMessageGoesToADeadLetterQueueWithItsReasonAndTheNextEventIsAppliedOnce() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(DESTINATION, ThingHappened.NAME, "hello".getBytes(UTF_8), null);
        rabbit.publish(DESTINATION, event);
        rabbit.publish(DESTINATION, event);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(1));
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(rabbit.messageCount(QUEUE)).isZero());
        List<GetResponse> deadLetters = rabbit.drain(QUEUE + ".dlq");
        assertThat(new String(deadLetters.get(0).getBody(), UTF_8)).isEqualTo("hello");
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("NOT_JSON: ");
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId()))
                .isEqualTo(1);
        assertThat(this.probe.invocations("recordThing")).isEqualTo(1);
        assertThat(this.logs.events())
                .as("the rejection's one WARN line, nothing from the binder or the container, no copy logged")
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                // The binding's consumer threads, named after its queue: not other tests' services in this JVM.
                .filteredOn(log -> log.getThreadName().startsWith(QUEUE))
                .singleElement()
                .satisfies(log -> {
                    assertThat(log.getFormattedMessage()).contains("NOT_JSON: ");
                    assertThat(log.getThrowableProxy()).as("no stack trace").isNull();
                });
    }
}
