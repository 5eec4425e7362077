package dev.exactlyonce.idempotency.binder.rabbit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.DeliveryRecorder.Attempt;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binding.BindingsLifecycleController;
import org.springframework.cloud.stream.binding.BindingsLifecycleController.State;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A guarded binding of one message per transaction, at the library's defaults on a real RabbitMQ, acknowledges its
 * messages to the broker in groups: each message commits on its own, and the broker hears of a group once. A group
 * whose acknowledgement is lost (the connection dropped after its last message committed) is delivered again, whole,
 * and the guard discards every copy: each effect once. A message of a group that fails goes to the dead-letter queue
 * alone.
 */
@SpringBootTest(
        classes = AcknowledgementGroupsOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit"
        })
@EnableIdempotencyTestKit(testBinder = false)
class AcknowledgementGroupsOnRabbitIT {

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

    private static final String DESTINATION = rabbit.uniqueName("ack-groups");

    private static final String GROUP = "things";

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + "." + GROUP);

    private static final String BINDING = "idempotencyGuardrecordThing-in-0";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("ackgroups").registerDataSource(registry);
        rabbit.registerConnection(registry);
        String binding = "spring.cloud.stream.bindings." + BINDING + ".";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> GROUP);
        registry.add(binding + "consumer.auto-startup", () -> "false");
    }

    @Autowired
    BindingsLifecycleController bindings;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    CachingConnectionFactory connectionFactory;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @BeforeEach
    void start() {
        this.recorder.reset();
        this.probe.reset();
    }

    @AfterEach
    void stop() {
        this.bindings.changeState(BINDING, State.STOPPED);
    }

    @Test
    void aGroupWhoseAcknowledgementIsLostIsDeliveredAgainAndEveryCopyIsDiscarded() {
        List<EventEnvelope<ThingHappened>> events =
                Stream.generate(Things::thingHappened).limit(5).toList();
        EventEnvelope<ThingHappened> last = events.get(events.size() - 1);
        // The connection dropped once the last event committed, before the broker heard of it.
        this.recorder.afterCommit(last.eventId(), this.connectionFactory::resetConnection);
        events.forEach(event -> rabbit.publish(DESTINATION, event));

        this.bindings.changeState(BINDING, State.STARTED);

        for (EventEnvelope<ThingHappened> event : events) {
            List<Attempt> attempts = await().alias("every event of the group delivered again")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> this.recorder.attempts(event.eventId()), delivered -> delivered.size() == 2);
            assertThat(attempts.get(0).redelivered()).isFalse();
            assertThat(attempts.get(1).redelivered()).isTrue();
            assertThat(attempts)
                    .allSatisfy(attempt -> assertThat(attempt.failure()).isNull());
        }
        assertThat(effects(events)).as("each effect once").isEqualTo(events.size());
        assertThat(this.probe.invocations("recordThing")).isEqualTo(events.size());
    }

    @Test
    void aMessageOfAGroupThatFailsGoesToTheDeadLetterQueueAloneAndTheGroupIsNotDeliveredAgain() {
        EventEnvelope<ThingHappened> before = Things.thingHappened();
        EventEnvelope<ThingHappened> after = Things.thingHappened();
        rabbit.publish(DESTINATION, before);
        rabbit.publish(DESTINATION, ThingHappened.NAME, "hello".getBytes(UTF_8), null);
        rabbit.publish(DESTINATION, after);

        this.bindings.changeState(BINDING, State.STARTED);

        await().atMost(Duration.ofSeconds(30)).until(() -> effects(List.of(before, after)) == 2);
        await().atMost(Duration.ofSeconds(30)).until(() -> rabbit.messageCount(QUEUE + ".dlq") == 1);
        // A message given back (rejected with the ones before it) would be delivered again before a later one.
        EventEnvelope<ThingHappened> later = Things.thingHappened();
        rabbit.publish(DESTINATION, later);
        await().atMost(Duration.ofSeconds(30)).until(() -> effects(List.of(later)) == 1);

        assertThat(rabbit.drain(QUEUE + ".dlq"))
                .singleElement()
                .satisfies(deadLetter ->
                        assertThat(new String(deadLetter.getBody(), UTF_8)).isEqualTo("hello"));
        assertThat(this.recorder.attempts(before.eventId())).hasSize(1);
        assertThat(this.recorder.attempts(after.eventId())).hasSize(1);
    }

    private int effects(List<EventEnvelope<ThingHappened>> events) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ANY (?::uuid[])", Integer.class, (Object)
                        events.stream()
                                .map(event -> event.payload().thingId().toString())
                                .toArray(String[]::new));
    }
}
