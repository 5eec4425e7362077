package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.observability.IdempotencyEndpoint;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Events forged by a neighbour that may publish to the exchange under some routing key, on a real RabbitMQ: an event
 * routed under a name that is not its own is dead-lettered with its reason and never applied, so its id does not
 * suppress the genuine event; a name that could forge a log line is rejected, and logged escaped. The service is
 * configured as minimally as README's getting-started ({@code minimal-service.yml}), its queue bound with {@code #}.
 */
@SpringBootTest(classes = ForgedEventsOnRabbitIT.Service.class, properties = "spring.config.name=minimal-service")
@EnableIdempotencyTestKit(testBinder = false)
class ForgedEventsOnRabbitIT {

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

    private static final String DESTINATION = rabbit.topicExchange("forged");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    /** The queue's replay exchange, which operators declare and bind to the queue for the dead-letter replay. */
    private static final String REPLAY = rabbit.directExchange(QUEUE + ".replay");

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    /** A routing key the neighbour may publish: the name of an event of its own. */
    private static final String NEIGHBOURS_ROUTING_KEY = "test.neighbour.noticed.v1";

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("forged").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
        registry.add(BINDING + "consumer.back-off-initial-interval", () -> "100");
        // Every key, as the queue of a service that also takes the neighbour's events would be bound: the library's
        // default binds only the names the functions map.
        registry.add(
                "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.binding-routing-key",
                () -> "#");
    }

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    DataSource dataSource;

    @Autowired
    IdempotencyProperties properties;

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    @BeforeEach
    void drainDeadLettersAndBindTheReplayExchange() throws Exception {
        rabbit.purge(QUEUE + ".dlq");
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueBind(QUEUE, REPLAY, QUEUE);
        }
    }

    @Test
    void anEventRoutedUnderAnotherNameIsDeadLetteredAndTheGenuineEventOfItsIdIsApplied() {
        EventEnvelope<ThingHappened> genuine = Things.thingHappened();
        EventEnvelope<ThingHappened> forged = new EventEnvelope<>(
                genuine.eventId(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(genuine.payload().thingId(), new BigDecimal("999.000")));

        rabbit.publish(
                DESTINATION,
                NEIGHBOURS_ROUTING_KEY,
                CODEC.encode(forged),
                forged.eventId().toString());

        List<GetResponse> deadLetters = awaitDeadLetters(1);
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("ROUTE_MISMATCH: ")
                .contains(NEIGHBOURS_ROUTING_KEY);
        assertThat(amounts(genuine)).as("the forged event applied nothing").isEmpty();

        rabbit.publish(DESTINATION, genuine);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(amounts(genuine))
                        .as("the genuine event, not suppressed by the forged one's id")
                        .containsExactly(new BigDecimal("2.500")));
    }

    /**
     * The neighbour also sets, as AMQP headers of its own, the names under which the binder hands on the routing key,
     * the exchange and the queue a message arrived by: they must not replace what the broker says.
     */
    @ParameterizedTest
    @ValueSource(strings = {"routing key", "replay exchange"})
    void forgedHeadersNamingAnotherRouteDoNotHideTheRouteTheEventArrivedBy(String forgery) throws Exception {
        EventEnvelope<ThingHappened> forged = Things.thingHappened();
        Map<String, Object> headers = forgery.equals("routing key")
                ? Map.of("amqp_receivedRoutingKey", ThingHappened.NAME)
                : Map.of(
                        "amqp_receivedExchange",
                        QUEUE + ".replay",
                        "amqp_consumerQueue",
                        QUEUE,
                        "x-original-exchange",
                        DESTINATION,
                        "x-original-routingKey",
                        ThingHappened.NAME);
        publish(
                DESTINATION,
                NEIGHBOURS_ROUTING_KEY,
                new AMQP.BasicProperties.Builder()
                        .contentType("application/json")
                        .messageId(forged.eventId().toString())
                        .headers(headers)
                        .build(),
                CODEC.encode(forged));

        List<GetResponse> deadLetters = awaitDeadLetters(1);
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("ROUTE_MISMATCH: ")
                .contains(NEIGHBOURS_ROUTING_KEY);
        assertThat(amounts(forged)).as("the forged event applied nothing").isEmpty();
    }

    @Test
    void anEventNameThatWouldForgeALogLineIsRejectedAndLoggedEscaped() {
        String name = ThingHappened.NAME + "\n2026-11-30T00:00:00Z ERROR forged line";
        UUID eventId = UUID.randomUUID();
        byte[] body = ("{\"event_id\":\"%s\",\"event_name\":\"%s\",\"occurred_at\":\"2026-11-30T00:00:00Z\","
                        + "\"payload\":{\"thingId\":\"%s\",\"amount\":\"1.000\"}}")
                .formatted(eventId, name.replace("\n", "\\n"), UUID.randomUUID())
                .getBytes(java.nio.charset.StandardCharsets.UTF_8);

        rabbit.publish(DESTINATION, name, body, eventId.toString());

        List<GetResponse> deadLetters = awaitDeadLetters(1);
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("INVALID_EVENT_NAME: ")
                .doesNotContain("\n");
        assertThat(this.logs.events())
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .filteredOn(log -> log.getFormattedMessage().contains(eventId.toString()))
                .isNotEmpty()
                .allSatisfy(log -> assertThat(log.getFormattedMessage())
                        .as("one line, whatever the message holds")
                        .doesNotContain("\n")
                        .contains("\\u000a"));
        assertThat(this.probe.invocations("recordThing")).isZero();
    }

    /**
     * A failure's text that the library did not write (a dependency's answer, quoted by its client's exception) is
     * shown escaped and cut in the dead letter's reason: it forges no line where an operator reads it, and holds no
     * more than one.
     */
    @Test
    void aFailuresForeignTextIsEscapedAndCutInTheDeadLetter() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        String answer = "the provider said: no\n2026-12-04T00:00:00Z ERROR forged line " + "x".repeat(10_000);
        for (int attempt = 0; attempt < 3; attempt++) {
            this.probe.failNextWith("recordThing", new IllegalStateException(answer));
        }

        rabbit.publish(DESTINATION, event);

        assertThat(awaitDeadLetters(1).get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("java.lang.IllegalStateException: the provider said: no\\u000a2026-12-04")
                .doesNotContain("\n")
                .hasSizeLessThan(300);
        assertThat(amounts(event)).isEmpty();
    }

    /**
     * Whoever may write to the queue's replay exchange ({@code <queue>.replay}, which operators bind to the queue for
     * the dead-letter replay), or to the default exchange, sends a message of its own with the headers that record a
     * dead letter's first route: a replay's, the binder's republisher's, or the broker's own (a message it expired).
     * The service never dead-lettered it, so it takes none of them.
     */
    @ParameterizedTest
    @ValueSource(strings = {"replayed routing key", "original routing key", "death by expiry"})
    void aMessageMovedBackToTheQueueThatTheServiceNeverDeadLetteredIsRefused(String forgery) throws Exception {
        EventEnvelope<ThingHappened> forged = Things.thingHappened();
        Map<String, Object> headers = switch (forgery) {
            case "replayed routing key" -> Map.of("x-replayed-routing-key", ThingHappened.NAME);
            case "original routing key" ->
                Map.of("x-original-exchange", DESTINATION, "x-original-routingKey", ThingHappened.NAME);
            default ->
                Map.of(
                        "x-death",
                        List.of(Map.of(
                                "queue",
                                QUEUE,
                                "reason",
                                "expired",
                                "count",
                                1L,
                                "exchange",
                                DESTINATION,
                                "routing-keys",
                                List.of(ThingHappened.NAME))));
        };

        moveBack(forgery.equals("original routing key") ? "" : REPLAY, headers, CODEC.encode(forged));

        List<GetResponse> deadLetters = awaitDeadLetters(1);
        assertThat(deadLetters.get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("UNRECORDED_DEAD_LETTER: ");
        assertThat(amounts(forged)).as("the forged event applied nothing").isEmpty();
    }

    /**
     * A dead letter the service dead-lettered itself (its function failed every attempt), moved back through the replay
     * exchange as the replay does, is applied once; the same dead letter with another body is not. Once applied, it no
     * longer waits, in the idempotency endpoint.
     */
    @Test
    void aDeadLetterTheServiceRecordedIsTakenBackWithItsBodyAndNoOtherBody() throws Exception {
        EventEnvelope<ThingHappened> genuine = Things.thingHappened();
        this.probe.failNext("recordThing", 3);
        rabbit.publish(DESTINATION, genuine);
        GetResponse deadLetter = awaitDeadLetters(1).get(0);
        IdempotencyEndpoint.DeadLetters waiting = deadLettersWaiting();
        assertThat(waiting.waiting())
                .as("dead letters waiting, this one included")
                .isPositive();
        assertThat(waiting.oldestAge()).isNotNull();
        EventEnvelope<ThingHappened> altered = new EventEnvelope<>(
                genuine.eventId(),
                ThingHappened.NAME,
                genuine.occurredAt(),
                new ThingHappened(genuine.payload().thingId(), new BigDecimal("999.000")));

        moveBack(REPLAY, deadLetter.getProps().getHeaders(), CODEC.encode(altered));

        assertThat(awaitDeadLetters(1).get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("UNRECORDED_DEAD_LETTER: ");
        assertThat(amounts(genuine)).isEmpty();

        moveBack(REPLAY, deadLetter.getProps().getHeaders(), deadLetter.getBody());

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(amounts(genuine)).containsExactly(new BigDecimal("2.500")));
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).isZero();
        assertThat(deadLettersWaiting().waiting())
                .as("taken back: no longer waiting")
                .isEqualTo(waiting.waiting() - 1);
    }

    private IdempotencyEndpoint.DeadLetters deadLettersWaiting() {
        IdempotencyEndpoint.DeadLetters deadLetters = new IdempotencyEndpoint(this.dataSource, this.properties)
                .status()
                .deadLetters();
        assertThat(deadLetters).as("the schema records dead letters").isNotNull();
        return deadLetters;
    }

    /**
     * A schema made from a script older than the mark of a replay taken back, by a service that migrates the library's
     * tables itself: the binding, which takes dead letters back, is refused at start-up with the statement to run,
     * rather than failing every replay.
     */
    @Test
    void aTableOfDeadLettersWithoutItsTakenBackColumnIsRefusedNamingTheStatementToRun() {
        TestDatabase older = TestPostgres.newDatabase("forgedolder");
        JdbcTemplate jdbc =
                new JdbcTemplate(new DriverManagerDataSource(older.jdbcUrl(), older.username(), older.password()));
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(jdbc.getDataSource());
        jdbc.execute("ALTER TABLE processed_event_dead_letter DROP COLUMN taken_back_at");

        Throwable failure = Deployment.of(Service.class)
                .on(older)
                .on(rabbit)
                .with(
                        "spring.config.name=minimal-service",
                        "spring.cloud.function.definition=idempotencyGuard|recordThing",
                        BINDING + "destination=" + DESTINATION,
                        BINDING + "group=older",
                        "idempotency.migrate-with-flyway=false",
                        // The service's own migrations, in a schema that holds the library's tables already.
                        "spring.flyway.baseline-on-migrate=true",
                        "spring.flyway.baseline-version=0")
                .startupFailure();
        rabbit.deleteAtExit(DESTINATION + ".older");

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("has no column taken_back_at")
                .satisfies(refusal -> assertThat(((StartupRefusal) refusal).action())
                        .contains("ALTER TABLE processed_event_dead_letter ADD COLUMN taken_back_at timestamptz"));
    }

    /** Sends a message straight to the queue, as a replay moves a dead letter back: through that exchange. */
    private static void moveBack(String exchange, Map<String, Object> headers, byte[] body) throws Exception {
        publish(
                exchange,
                QUEUE,
                new AMQP.BasicProperties.Builder()
                        .contentType("application/json")
                        .deliveryMode(2)
                        .headers(headers)
                        .build(),
                body);
    }

    private static void publish(String exchange, String routingKey, AMQP.BasicProperties properties, byte[] body)
            throws Exception {
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish(exchange, routingKey, properties, body);
            channel.waitForConfirmsOrDie(10_000);
        }
    }

    private static List<GetResponse> awaitDeadLetters(int count) {
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(count));
        return rabbit.drain(QUEUE + ".dlq");
    }

    private List<BigDecimal> amounts(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?",
                BigDecimal.class,
                event.payload().thingId());
    }
}
