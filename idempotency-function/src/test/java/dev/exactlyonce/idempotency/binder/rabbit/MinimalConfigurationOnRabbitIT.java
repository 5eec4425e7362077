package dev.exactlyonce.idempotency.binder.rabbit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
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
 * A service configured as minimally as README's "Adopt it in your service" shows (the guard composed first, a
 * destination and a group, nothing else: {@code minimal-service.yml}), on a real RabbitMQ: a malformed message is
 * never dropped, it goes to a dead-letter queue the library gave the binding, with its reason, logged in one WARN line.
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
    DeliveryRecorder recorder;

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
        // Both copies attempted before the checks of what the copy did not do: the queue's ready count is zero as
        // soon as the consumer prefetched them.
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.recorder.attempts(event.eventId()))
                        .hasSize(2)
                        .allSatisfy(attempt -> assertThat(attempt.failure()).isNull()));
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
    /**
     * The queue is bound with the names of the events the functions map ({@code @EventName}), not with {@code #}: an
     * event of another name on the same exchange never reaches the service, where it would be dead-lettered as
     * {@code UNKNOWN_EVENT}.
     */
    @Test
    void anEventNoFunctionMapsNeverReachesTheService() {
        rabbit.purge(QUEUE + ".dlq");
        EventEnvelope<ThingHappened> other = new EventEnvelope<>(
                UUID.randomUUID(),
                "test.other.thing.v1",
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), BigDecimal.ONE));
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(DESTINATION, other);
        rabbit.publish(DESTINATION, event);

        // The queue delivers in order: once the mapped event was attempted, the other would have been before it.
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() ->
                        assertThat(this.recorder.attempts(event.eventId())).hasSize(1));
        assertThat(this.recorder.attempts(other.eventId()))
                .as("the event no function maps was not delivered")
                .isEmpty();
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).as("nor dead-lettered").isZero();
    }

    /**
     * Each kind of message the guard cannot process, as README's configuration receives it: every one in the
     * dead-letter queue with its reason, after one attempt each, and the event after them applied once.
     */
    @Test
    void eachKindOfPoisonGoesToTheDeadLetterQueueWithItsReasonAndTheNextEventIsAppliedOnce() {
        rabbit.purge(QUEUE + ".dlq");
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        String other = "test.other.thing.v1";
        Map<String, String> poison = new LinkedHashMap<>();
        poison.put("NOT_JSON", "hello");
        poison.put("NOT_AN_OBJECT", "[1, 2]");
        poison.put("MISSING_EVENT_ID", """
                {"event_name": "%s", "payload": {"thingId": "%s", "amount": 1}}""".formatted(ThingHappened.NAME, UUID.randomUUID()));
        poison.put("INVALID_EVENT_ID", """
                {"event_id": "not-a-uuid", "event_name": "%s", "payload": {}}""".formatted(ThingHappened.NAME));
        poison.put("MISSING_FIELD", """
                {"event_id": "%s", "event_name": "%s"}""".formatted(UUID.randomUUID(), ThingHappened.NAME));
        poison.put("INVALID_OCCURRED_AT", """
                {"event_id": "%s", "event_name": "%s", "occurred_at": "yesterday", "payload": {}}""".formatted(UUID.randomUUID(), ThingHappened.NAME));
        // An event of a name no function maps is not routed to the queue (see above), and one routed by a name the
        // functions map but naming another is a ROUTE_MISMATCH.
        poison.put("ROUTE_MISMATCH", """
                {"event_id": "%s", "event_name": "%s", "payload": {}}""".formatted(UUID.randomUUID(), other));
        poison.put("INVALID_PAYLOAD", """
                {"event_id": "%s", "event_name": "%s", "payload": {"thingId": "%s", "amount": "ten"}}""".formatted(UUID.randomUUID(), ThingHappened.NAME, UUID.randomUUID()));

        poison.forEach((reason, body) -> rabbit.publish(DESTINATION, ThingHappened.NAME, body.getBytes(UTF_8), null));
        rabbit.publish(DESTINATION, event);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(poison.size()));
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() ->
                        assertThat(this.recorder.attempts(event.eventId())).hasSize(1));
        assertThat(rabbit.drain(QUEUE + ".dlq"))
                .extracting(deadLetter -> deadLetter
                        .getProps()
                        .getHeaders()
                        .get("x-exception-message")
                        .toString())
                .extracting(reason -> reason.substring(0, reason.indexOf(':')))
                .containsExactlyInAnyOrderElementsOf(poison.keySet());
        assertThat(this.recorder.attempts())
                .as("one attempt per poison message, none retried, and the event's")
                .hasSize(poison.size() + 1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId()))
                .isEqualTo(1);
    }
}
