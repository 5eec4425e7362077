package dev.exactlyonce.stock;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * PostgreSQL goes away while events stream in (a proxy between the service and the server is cut, then restored),
 * for longer than all the attempts of a message would last (three, here 0.2 s and 0.4 s apart, each waiting up to 1 s
 * for a connection): consumption halts, nothing is dead-lettered, and once PostgreSQL answers again every event is
 * applied once, copies included, within seconds. Poison messages published during the outage are dead-lettered once
 * the database is back, with their reasons.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-initial-interval=200",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-max-interval=400"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
class DatabaseOutageOnRabbitIT {

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.";

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.topicExchange("events.outage");

    private static final String QUEUE = rabbit.uniqueName("stock.outage");

    static {
        // stock's dead-letter exchange, <group>.dlx: the broker's definitions declare it, not the service.
        rabbit.directExchange(QUEUE + ".dlx");
    }

    private static final TestDatabase database = TestPostgres.newDatabase("outage");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> EXCHANGE);
        registry.add(BINDING + "group", () -> QUEUE);
        // stock.stock.reserved.v1 goes to the run's exchange too: the production one, events, is not on this broker.
        registry.add("idempotency.outbox.destination", () -> EXCHANGE);
    }

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private final EnvelopeCodec codec = new EnvelopeCodec();

    @Autowired
    HealthIndicator idempotencyHealthIndicator;

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void anOutageLongerThanEveryAttemptDeadLettersNoEventAndEachIsAppliedOnceWhenPostgresIsBack() {
        EventEnvelope<Map<String, Object>> before = Orders.placed(1);
        publish(before);
        await().atMost(Duration.ofSeconds(30)).until(() -> Orders.reservations(this.jdbcTemplate, before) == 1);

        postgres.cut();
        List<EventEnvelope<Map<String, Object>>> during =
                IntStream.range(0, 20).mapToObj(i -> Orders.placed(2)).toList();
        for (EventEnvelope<Map<String, Object>> event : during) {
            publish(event);
            publish(event);
        }
        rabbit.publish(EXCHANGE, Orders.PLACED, "not json".getBytes(UTF_8), null);
        rabbit.publish(EXCHANGE, Orders.PLACED, "{\"event_name\": \"order.order.placed.v1\"}".getBytes(UTF_8), null);
        await().atMost(Duration.ofSeconds(10))
                .until(() ->
                        this.idempotencyHealthIndicator.health().getStatus().equals(Status.OUT_OF_SERVICE));
        // Three times as long as all the attempts of a message would last.
        await().during(Duration.ofSeconds(10)).atMost(Duration.ofSeconds(11)).until(() -> deadLetterCount() == 0);
        postgres.restore();
        long restored = System.nanoTime();

        await().atMost(Duration.ofSeconds(20)).until(() -> applied(during) == during.size());
        Duration resumedIn = Duration.ofNanos(System.nanoTime() - restored);
        await().atMost(Duration.ofSeconds(20)).until(() -> deadLetterCount() == 2);
        assertThat(during)
                .allSatisfy(event -> assertThat(Orders.reservations(this.jdbcTemplate, event))
                        .as("event %s applied once", event.eventId())
                        .isEqualTo(2));
        assertThat(drainDeadLetterReasons())
                .as("only the poison messages, with their reasons")
                .containsExactlyInAnyOrder("NOT_JSON", "MISSING_EVENT_ID");
        assertThat(this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class))
                .isEqualTo(1 + during.size());
        assertThat(resumedIn)
                .as("every event applied within seconds of PostgreSQL answering")
                .isLessThan(Duration.ofSeconds(15));
        assertThat(this.idempotencyHealthIndicator.health().getStatus()).isEqualTo(Status.UP);
    }

    private long applied(List<EventEnvelope<Map<String, Object>>> events) {
        return events.stream()
                .filter(event -> Orders.reservations(this.jdbcTemplate, event) > 0)
                .count();
    }

    private int deadLetterCount() {
        return rabbit.messageCount(QUEUE + ".dlq");
    }

    private List<String> drainDeadLetterReasons() {
        return rabbit.drain(QUEUE + ".dlq").stream()
                .map(response -> response.getProps()
                        .getHeaders()
                        .get("x-exception-message")
                        .toString())
                .map(reason -> reason.substring(0, reason.indexOf(':')))
                .toList();
    }

    private void publish(EventEnvelope<?> event) {
        rabbit.publish(EXCHANGE, event);
    }
}
