package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Connection;
import com.sun.net.httpserver.HttpServer;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.messaging.Message;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Outages on a quorum queue with RabbitMQ 4's default delivery limit (20; set to 20 on a 3.x broker, which has no
 * default), where every return of a delivery counts and the broker dead-letters a valid event past the limit:
 *
 * <ul>
 *   <li>the database away for half a minute, with a {@code max-hold} of 5 s: the binding stops taking deliveries once
 *       it gave one back, so each event goes back to the broker once per outage, not once per {@code max-hold};
 *   <li>the business function's payment provider frozen for half a minute (its connections accepted, nothing
 *       answered) while the database answers the probe's write: each trial fails. Held in place, each delivery is
 *       tried once per probe that passes, uses none of its attempts, and is given back at most once per
 *       {@code max-hold}, where each failed trial used to spend an attempt and every third gave it back.
 * </ul>
 *
 * Nothing is dead-lettered, and each event's effect is there once when the outage ends.
 */
@SpringBootTest(
        classes = OutagesOnAQuorumQueueIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|chargeThing",
            "spring.cloud.stream.default-binder=rabbit",
            "idempotency.outage.exceptions=dev.exactlyonce.idempotency.outage.OutagesOnAQuorumQueueIT.ProviderUnavailable",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=5s",
            "idempotency.outbox.relay.enabled=false",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes what the context connects through: the context must not stay cached.
@DirtiesContext
class OutagesOnAQuorumQueueIT {

    private static final Logger logger = LoggerFactory.getLogger(OutagesOnAQuorumQueueIT.class);

    /** The payment provider does not answer in time, or refuses the connection. */
    static final class ProviderUnavailable extends RuntimeException {

        private static final long serialVersionUID = 1L;

        ProviderUnavailable(IOException cause) {
            super("the payment provider does not answer: " + cause, cause);
        }
    }

    /** The service: it charges each thing through the provider, then records the effect. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<Message<ThingHappened>> chargeThing(JdbcTemplate jdbcTemplate) {
            HttpClient http = HttpClient.newBuilder()
                    .connectTimeout(Duration.ofMillis(500))
                    .build();
            return message -> {
                ThingHappened thing = message.getPayload();
                Object count = message.getHeaders().get("x-delivery-count");
                deliveries.merge(thing.thingId(), count instanceof Number number ? number.longValue() : 0L, Math::max);
                try {
                    http.send(
                            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + provider.port() + "/charge"))
                                    .timeout(Duration.ofMillis(500))
                                    .POST(HttpRequest.BodyPublishers.ofString(
                                            thing.thingId().toString()))
                                    .build(),
                            HttpResponse.BodyHandlers.discarding());
                } catch (IOException ex) {
                    throw new ProviderUnavailable(ex);
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(ex);
                }
                jdbcTemplate.update(
                        "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
            };
        }
    }

    private static final Duration OUTAGE = Duration.ofSeconds(30);

    private static final Duration MAX_HOLD = Duration.ofSeconds(5);

    private static final int EVENTS = 5;

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("quorum-outages");

    private static final String QUEUE = DESTINATION + ".things";

    private static final TestDatabase database = TestPostgres.newDatabase("quorumoutages");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    private static final HttpServer server = paymentProvider();

    private static final TcpProxy provider =
            TcpProxy.to("127.0.0.1", server.getAddress().getPort());

    /** Per thing, the highest {@code x-delivery-count} RabbitMQ gave a delivery of it. */
    private static final Map<UUID, Long> deliveries = new ConcurrentHashMap<>();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        registry.add("spring.datasource.hikari.connection-timeout", () -> "500");
        registry.add("spring.datasource.hikari.validation-timeout", () -> "250");
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(QUEUE);
        rabbit.deleteAtExit(QUEUE + ".dlq");
        String binding = "spring.cloud.stream.bindings.idempotencyGuardchargeThing-in-0.";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> "things");
        registry.add(binding + "consumer.back-off-initial-interval", () -> "100");
        registry.add(binding + "consumer.concurrency", () -> "2");
        String rabbitBinding = "spring.cloud.stream.rabbit.bindings.idempotencyGuardchargeThing-in-0.consumer.";
        registry.add(rabbitBinding + "quorum.enabled", () -> "true");
        if (majorVersion() < 4) {
            // RabbitMQ 4 gives a quorum queue a delivery limit of 20 by default; 3.x none.
            registry.add(rabbitBinding + "quorum.delivery-limit", () -> "20");
        }
    }

    /** Straight to the database. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Autowired
    ConsumptionHalt outage;

    @AfterAll
    static void close() {
        provider.close();
        server.stop(0);
        postgres.close();
    }

    @Test
    void theDatabaseAwayForHalfAMinuteGivesEachEventBackOnce() {
        postgres.cut();
        List<EventEnvelope<ThingHappened>> events = publish();
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        outageLasts();
        postgres.restore();

        appliedOnceAndNothingDeadLettered(events);
        assertThat(deliveries(events))
                .as(
                        "times each event was given back to RabbitMQ: once per outage (again if its consumer had it when the"
                                + " binding stopped)")
                .allSatisfy(count -> assertThat(count).isLessThanOrEqualTo(2));
    }

    @Test
    void aProviderFrozenForHalfAMinuteGivesEachEventBackAtMostOncePerMaxHold() {
        provider.freeze();
        List<EventEnvelope<ThingHappened>> events = publish();
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        outageLasts();
        provider.thaw();

        appliedOnceAndNothingDeadLettered(events);
        assertThat(deliveries(events))
                .as("times each event was given back to RabbitMQ: at most once per max-hold of the outage")
                .allSatisfy(count -> assertThat(count).isLessThanOrEqualTo(OUTAGE.dividedBy(MAX_HOLD) + 2));
    }

    private static List<EventEnvelope<ThingHappened>> publish() {
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        for (int i = 0; i < EVENTS; i++) {
            EventEnvelope<ThingHappened> event = Things.thingHappened();
            events.add(event);
            rabbit.publish(DESTINATION, event);
        }
        return events;
    }

    /** The outage lasts {@link #OUTAGE}, and nothing is dead-lettered meanwhile. */
    private static void outageLasts() {
        long until = System.nanoTime() + OUTAGE.toNanos();
        while (System.nanoTime() < until) {
            assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                    .as("dead letters during the outage; most deliveries seen so far: %s", deliveries)
                    .isZero();
            await().pollDelay(Duration.ofSeconds(1)).until(() -> true);
        }
    }

    private void appliedOnceAndNothingDeadLettered(List<EventEnvelope<ThingHappened>> events) {
        await().atMost(Duration.ofSeconds(60)).until(() -> events.stream().allMatch(event -> effects(event) == 1));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() == null);
        logger.info(
                "Times each event was given back over a {} outage, max-hold {}: {}",
                OUTAGE,
                MAX_HOLD,
                deliveries(events));
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).as("dead letters").isZero();
        assertThat(events)
                .allSatisfy(
                        event -> assertThat(effects(event)).as("applied once").isEqualTo(1));
    }

    private static List<Long> deliveries(List<EventEnvelope<ThingHappened>> events) {
        return events.stream()
                .map(event -> deliveries.getOrDefault(event.payload().thingId(), -1L))
                .toList();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }

    private static HttpServer paymentProvider() {
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            server.createContext("/charge", exchange -> {
                exchange.getRequestBody().readAllBytes();
                exchange.sendResponseHeaders(204, -1);
                exchange.close();
            });
            server.start();
            return server;
        } catch (IOException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private static int majorVersion() {
        try (Connection connection = rabbit.newConnection()) {
            String version = String.valueOf(connection.getServerProperties().get("version"));
            return Integer.parseInt(version.substring(0, version.indexOf('.')));
        } catch (IOException ex) {
            throw new IllegalStateException(ex);
        }
    }
}
