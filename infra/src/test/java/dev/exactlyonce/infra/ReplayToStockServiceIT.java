package dev.exactlyonce.infra;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.ServiceProcess;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import tools.jackson.databind.json.JsonMapper;

/**
 * The replay command against the stock service run from its jar: replaying an event the service already applied
 * has no effect, and replaying one that was dead-lettered for a failure fixed since (here, a check constraint that
 * refused its reservations, then dropped) applies it once, whether the service reads the event from the envelope or
 * from the message's properties and routing key.
 */
class ReplayToStockServiceIT {

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.";

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.topicExchange("events");

    private static final String QUEUE = rabbit.uniqueName("stock.events");

    /** The exchange and queue of a second stock service, which reads event ids from the AMQP message id. */
    private static final String BARE_EXCHANGE = rabbit.topicExchange("bare-events");

    private static final String BARE_QUEUE = rabbit.uniqueName("stock.bare");

    static {
        // The services' dead-letter exchanges, <group>.dlx: the broker's definitions declare them, not the services.
        rabbit.directExchange(QUEUE + ".dlx");
        rabbit.directExchange(BARE_QUEUE + ".dlx");
    }

    private static final TestDatabase database = TestPostgres.newDatabase("replay");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    private static final JdbcTemplate jdbc = jdbc(database);

    private static final TestDatabase bareDatabase = TestPostgres.newDatabase("replaybare");

    private static final JdbcTemplate bareJdbc = jdbc(bareDatabase);

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private static Connection connection;

    private static ServiceProcess stock;

    private static ServiceProcess bareStock;

    private final EnvelopeCodec codec = new EnvelopeCodec();

    private final DeadLetterReplay replay =
            new DeadLetterReplay(new PrintStream(new ByteArrayOutputStream(), true, UTF_8));

    @BeforeAll
    static void startStockServices() {
        connection = rabbit.newConnection();
        stock = startStockService(EXCHANGE, QUEUE, database, "replay-stock-service.log");
        bareStock = startStockService(
                BARE_EXCHANGE,
                BARE_QUEUE,
                bareDatabase,
                "replay-bare-stock-service.log",
                "idempotency.event-id.source=message-id");
        // Their replay exchanges, which the broker's definitions declare: the replay moves dead letters through them.
        ReplayExchanges.declareAndBind(rabbit, QUEUE);
        ReplayExchanges.declareAndBind(rabbit, BARE_QUEUE);
    }

    private static ServiceProcess startStockService(
            String exchange, String queue, TestDatabase database, String log, String... properties) {
        List<String> all = new ArrayList<>(List.of(
                "spring.datasource.url=jdbc:postgresql://127.0.0.1:%d/%s".formatted(postgres.port(), database.name()),
                "spring.datasource.username=" + database.username(),
                "spring.datasource.password=" + database.password(),
                "spring.datasource.hikari.connection-timeout=1000",
                "spring.rabbitmq.host=" + rabbit.host(),
                "spring.rabbitmq.port=" + rabbit.port(),
                "spring.rabbitmq.username=" + rabbit.username(),
                "spring.rabbitmq.password=" + rabbit.password(),
                "shop.relay.username=" + rabbit.username(),
                "shop.relay.password=" + rabbit.password(),
                BINDING + "destination=" + exchange,
                BINDING + "group=" + queue,
                BINDING + "consumer.back-off-initial-interval=100",
                BINDING + "consumer.back-off-max-interval=200",
                "logging.level.dev.exactlyonce.idempotency.guard.IdempotencyGuard=debug",
                "server.port=0",
                "management.server.port=0"));
        all.addAll(List.of(properties));
        return ServiceProcess.start(
                ServiceProcess.jar(Path.of(System.getProperty("services.dir", "..")), "stock-service"),
                "stock-service",
                all,
                Path.of("target", log));
    }

    @AfterAll
    static void stop() throws Exception {
        stock.close();
        bareStock.close();
        connection.close();
        postgres.close();
    }

    /**
     * The passwords a service is started with are not on its command line, which every user of the machine can read
     * ({@code ps}); they reach it in its environment, which only its owner can.
     */
    @Test
    void theServicesPasswordsAreNotOnItsCommandLine() {
        assertThat(stock.commandLine()).contains("stock-service").doesNotContain("password");
    }

    @BeforeEach
    void drainDeadLetters() {
        rabbit.purge(QUEUE + ".dlq");
        rabbit.purge(BARE_QUEUE + ".dlq");
    }

    /** Two copies of one event dead-lettered: replayed together, the first is applied, the second discarded. */
    @Test
    void replayingAnEventTheServiceAlreadyAppliedHasNoEffect() throws Exception {
        EventEnvelope<Map<String, Object>> order = order(2);
        refuseReservations(jdbc);
        try {
            publish(order);
            publish(order);
            await().atMost(Duration.ofSeconds(30)).until(() -> deadLetters() == 2);
        } finally {
            allowReservations(jdbc);
        }

        assertThat(this.replay
                        .replay(connection, QUEUE, Set.of(order.eventId()), false)
                        .replayed())
                .isEqualTo(2);

        stock.awaitLog("Discarded event " + order.eventId(), Duration.ofSeconds(30));
        assertThat(reservations(order)).isEqualTo(2);
        assertThat(processed(order)).isEqualTo(1);
        assertThat(deadLetters()).isZero();
    }

    /**
     * A message in the dead-letter queue that the service never dead-lettered (put there by whoever may write to it,
     * with the headers that record a first route) is moved back, and refused: dead-lettered again, never applied.
     */
    @Test
    void aDeadLetterTheServiceNeverDeadLetteredIsRefusedWhenReplayed() throws Exception {
        EventEnvelope<Map<String, Object>> order = order(2);
        deadLetterCopy(order);

        assertThat(this.replay
                        .replay(connection, QUEUE, Set.of(order.eventId()), false)
                        .replayed())
                .isEqualTo(1);

        await().atMost(Duration.ofSeconds(30)).until(() -> deadLetters() == 1);
        assertThat(rabbit.drain(QUEUE + ".dlq").get(0).getProps().getHeaders().get("x-exception-message"))
                .asString()
                .startsWith("UNRECORDED_DEAD_LETTER: ");
        assertThat(reservations(order)).isZero();
        assertThat(processed(order)).isZero();
    }

    @Test
    void replayingAnEventDeadLetteredForAFailureFixedSinceAppliesItOnce() throws Exception {
        EventEnvelope<Map<String, Object>> order = order(3);
        refuseReservations(jdbc);
        try {
            publish(order);
            await().atMost(Duration.ofSeconds(30)).until(() -> deadLetters() == 1);
        } finally {
            allowReservations(jdbc);
        }
        assertThat(reservations(order)).isZero();

        DeadLetterReplay.Result result = this.replay.replay(connection, QUEUE, Set.of(order.eventId()), false);

        assertThat(result.replayed()).isEqualTo(1);
        await().atMost(Duration.ofSeconds(30)).until(() -> reservations(order) == 3);
        assertThat(processed(order)).isEqualTo(1);
        assertThat(deadLetters()).isZero();
    }

    /**
     * A replayed dead letter that fails again is dead-lettered again, now as a message of the replay exchange (the
     * binder records that exchange and the queue's name as its route): replayed once more, it is still checked against
     * the routing key it was first published with, and applied.
     */
    @Test
    void aDeadLetterReplayedTwiceKeepsTheRoutingKeyItWasFirstPublishedWith() throws Exception {
        EventEnvelope<Map<String, Object>> order = order(2);
        refuseReservations(jdbc);
        try {
            publish(order);
            await().atMost(Duration.ofSeconds(30)).until(() -> deadLetters() == 1);
            assertThat(this.replay
                            .replay(connection, QUEUE, Set.of(order.eventId()), false)
                            .replayed())
                    .isEqualTo(1);
            await().atMost(Duration.ofSeconds(30))
                    .alias("dead-lettered again: the failure is not fixed yet")
                    .until(() -> deadLetters() == 1);
        } finally {
            allowReservations(jdbc);
        }

        assertThat(this.replay
                        .replay(connection, QUEUE, Set.of(order.eventId()), false)
                        .replayed())
                .isEqualTo(1);

        await().atMost(Duration.ofSeconds(30)).until(() -> reservations(order) == 2);
        assertThat(processed(order)).isEqualTo(1);
        assertThat(deadLetters()).isZero();
    }

    @Test
    void aDeadLetterOfAServiceThatReadsTheEventFromTheMessageIdAndRoutingKeyIsAppliedOnceWhenReplayed()
            throws Exception {
        EventEnvelope<Map<String, Object>> order = order(2);
        refuseReservations(bareJdbc);
        try {
            rabbit.publish(
                    BARE_EXCHANGE,
                    order.eventName(),
                    JSON.writeValueAsBytes(order.payload()),
                    order.eventId().toString());
            await().atMost(Duration.ofSeconds(30)).until(() -> rabbit.messageCount(BARE_QUEUE + ".dlq") == 1);
        } finally {
            allowReservations(bareJdbc);
        }

        DeadLetterReplay.Result result = this.replay.replay(connection, BARE_QUEUE, Set.of(order.eventId()), false);

        assertThat(result.replayed()).isEqualTo(1);
        await().atMost(Duration.ofSeconds(30)).until(() -> reservations(bareJdbc, order) == 2);
        assertThat(rabbit.messageCount(BARE_QUEUE + ".dlq")).isZero();
    }

    /** A failure of every attempt that is not an outage: reservations violate a check constraint. */
    private static void refuseReservations(JdbcTemplate jdbc) {
        jdbc.execute("ALTER TABLE reservation ADD CONSTRAINT replay_test_refused CHECK (quantity < 0) NOT VALID");
    }

    private static void allowReservations(JdbcTemplate jdbc) {
        jdbc.execute("ALTER TABLE reservation DROP CONSTRAINT replay_test_refused");
    }

    private static EventEnvelope<Map<String, Object>> order(int lines) {
        Map<String, Object> payload = Map.of(
                "orderId", UuidV7.generate().toString(),
                "customerId", UUID.randomUUID().toString(),
                "version", 1,
                "currency", "EUR",
                "lines",
                        IntStream.range(0, lines)
                                .mapToObj(line -> Map.of(
                                        "productId", UUID.randomUUID().toString(),
                                        "quantity", "1.000",
                                        "unitPrice", "4.20"))
                                .toList());
        return new EventEnvelope<>(UuidV7.generate(), "order.order.placed.v1", Instant.now(), payload);
    }

    private static void publish(EventEnvelope<?> event) {
        rabbit.publish(EXCHANGE, event);
    }

    /**
     * A copy of the event put in the dead-letter queue as the binder's republisher leaves one, with the exchange and
     * routing key it was first published with, by someone other than the service.
     */
    private void deadLetterCopy(EventEnvelope<?> event) throws Exception {
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .messageId(event.eventId().toString())
                .deliveryMode(2)
                .headers(Map.of("x-original-exchange", EXCHANGE, "x-original-routingKey", event.eventName()))
                .build();
        try (Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish("", QUEUE + ".dlq", properties, this.codec.encode(event));
            channel.waitForConfirmsOrDie(10_000);
        }
    }

    private static int deadLetters() {
        return rabbit.messageCount(QUEUE + ".dlq");
    }

    private static int reservations(EventEnvelope<Map<String, Object>> order) {
        return reservations(jdbc, order);
    }

    private static int reservations(JdbcTemplate jdbc, EventEnvelope<Map<String, Object>> order) {
        Integer count = jdbc.queryForObject(
                "SELECT count(*) FROM reservation WHERE order_id = ?::uuid",
                Integer.class,
                order.payload().get("orderId"));
        return count != null ? count : 0;
    }

    private static JdbcTemplate jdbc(TestDatabase database) {
        return new JdbcTemplate(
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));
    }

    private static int processed(EventEnvelope<?> event) {
        Integer count = jdbc.queryForObject(
                "SELECT count(*) FROM processed_event WHERE event_id = ?", Integer.class, event.eventId());
        return count != null ? count : 0;
    }
}
