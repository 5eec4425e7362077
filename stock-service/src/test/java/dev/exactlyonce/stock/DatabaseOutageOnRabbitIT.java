package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * PostgreSQL goes away while events arrive (a proxy between the service and the server is cut, then restored), and
 * no event is lost: each one is either applied once, after the database comes back, or sits in the dead-letter
 * queue, never both. An event lands in the dead-letter queue when all its attempts (three, here 0.2 s and 0.4 s
 * apart, each waiting up to 1 s for a connection) fall inside the outage; the events still queued when the database
 * comes back are applied.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-initial-interval=200",
            "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.consumer.back-off-max-interval=400"
        })
@EnableIdempotencyTestKit(testBinder = false)
class DatabaseOutageOnRabbitIT {

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardreserveStock-in-0.";

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.uniqueName("events");

    private static final String QUEUE = rabbit.uniqueName("stock.outage");

    private static final TestDatabase database = TestPostgres.newDatabase("outage");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> EXCHANGE);
        registry.add(BINDING + "group", () -> QUEUE);
    }

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private final EnvelopeCodec codec = new EnvelopeCodec();

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void noEventIsLostWhilePostgresIsAway() {
        EventEnvelope<Map<String, Object>> before = Orders.placed(1);
        publish(before);
        await().atMost(Duration.ofSeconds(30)).until(() -> reservations(before) == 1);

        postgres.cut();
        List<EventEnvelope<Map<String, Object>>> during =
                IntStream.range(0, 6).mapToObj(i -> Orders.placed(2)).toList();
        for (EventEnvelope<Map<String, Object>> event : during) {
            publish(event);
        }
        await().atMost(Duration.ofSeconds(60)).until(() -> deadLetterCount() >= 2);
        postgres.restore();

        await().atMost(Duration.ofSeconds(60)).until(() -> applied(during) + deadLetterCount() == during.size());
        Map<UUID, Integer> deadLettered = drainDeadLetters();
        List<UUID> applied = new ArrayList<>();
        for (EventEnvelope<Map<String, Object>> event : during) {
            int reservations = reservations(event);
            boolean dead = deadLettered.containsKey(event.eventId());
            assertThat(dead ? 0 : 2)
                    .as("event %s: dead-lettered or applied once, never both", event.eventId())
                    .isEqualTo(reservations);
            if (!dead) {
                applied.add(event.eventId());
            }
        }
        assertThat(deadLettered)
                .hasSizeGreaterThanOrEqualTo(2)
                .allSatisfy((id, copies) -> assertThat(copies).isEqualTo(1));
        assertThat(applied.size() + deadLettered.size()).isEqualTo(during.size());
        assertThat(this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class))
                .isEqualTo(1 + applied.size());
    }

    private long applied(List<EventEnvelope<Map<String, Object>>> events) {
        return events.stream().filter(event -> reservations(event) > 0).count();
    }

    private int deadLetterCount() {
        return rabbit.messageCount(QUEUE + ".dlq");
    }

    private Map<UUID, Integer> drainDeadLetters() {
        Map<UUID, Integer> copies = new HashMap<>();
        for (GetResponse response : rabbit.drain(QUEUE + ".dlq")) {
            assertThat(response.getProps().getHeaders().get("x-exception-message"))
                    .asString()
                    .containsIgnoringCase("connection");
            copies.merge(this.codec.decode(response.getBody()).eventId(), 1, Integer::sum);
        }
        return copies;
    }

    private void publish(EventEnvelope<?> event) {
        rabbit.publish(EXCHANGE, event);
    }

    private int reservations(EventEnvelope<Map<String, Object>> order) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM reservation WHERE order_id = ?", Integer.class, Orders.orderId(order));
        return count != null ? count : 0;
    }
}
