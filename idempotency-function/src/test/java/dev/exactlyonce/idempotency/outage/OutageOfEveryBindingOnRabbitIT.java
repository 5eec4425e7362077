package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A service with two guarded bindings on a real RabbitMQ, {@code recordThing} and {@code auditThing}, each on a
 * destination of its own: when one finds PostgreSQL away, consumption of both halts. A message the other binding
 * receives during the outage is held before its first attempt (it spends none of its attempts finding out for itself),
 * and both events are applied once when PostgreSQL answers again, nothing dead-lettered.
 */
@SpringBootTest(
        classes = OutageOfEveryBindingOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing;idempotencyGuard|auditThing",
            "spring.cloud.stream.default-binder=rabbit",
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
class OutageOfEveryBindingOnRabbitIT {

    /** The service: its two business functions, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }

        @Bean
        Consumer<ThingHappened> auditThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update("INSERT INTO thing_audit (thing_id) VALUES (?)", thing.thingId());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final Map<String, String> DESTINATIONS = Map.of(
            "recordThing", rabbit.uniqueName("outage-record"),
            "auditThing", rabbit.uniqueName("outage-audit"));

    private static final String GROUP = "things";

    private static final TestDatabase database = TestPostgres.newDatabase("twobindings");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        DESTINATIONS.forEach((function, destination) -> {
            rabbit.deleteAtExit(destination + "." + GROUP);
            String binding = "spring.cloud.stream.bindings.idempotencyGuard" + function + "-in-0.";
            registry.add(binding + "destination", () -> destination);
            registry.add(binding + "group", () -> GROUP);
            registry.add(binding + "consumer.max-attempts", () -> "2");
            registry.add(binding + "consumer.back-off-initial-interval", () -> "10");
        });
    }

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    DeliveryRecorder recorder;

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void anOutageFoundByOneBindingHaltsTheOtherWhoseMessageIsHeldBeforeItsFirstAttempt() {
        EventEnvelope<ThingHappened> recorded = Things.thingHappened();
        EventEnvelope<ThingHappened> audited = Things.thingHappened();
        postgres.cut();

        rabbit.publish(DESTINATIONS.get("recordThing"), recorded);
        await().alias("recordThing's binding finds PostgreSQL away and halts consumption")
                .atMost(Duration.ofSeconds(10))
                .until(() -> this.outage.halt() != null);
        rabbit.publish(DESTINATIONS.get("auditThing"), audited);
        // Longer than an attempt of auditThing's message would take to find the database away (a 1 s wait).
        await().during(Duration.ofSeconds(3))
                .atMost(Duration.ofSeconds(4))
                .until(() -> this.recorder.attempts(audited.eventId()).isEmpty());
        postgres.restore();

        // The recorder hears of an attempt once its transaction ended, which may be after the effect is visible.
        await().atMost(Duration.ofSeconds(20))
                .until(() -> count("thing_effect", recorded) == 1
                        && count("thing_audit", audited) == 1
                        && !this.recorder.attempts(audited.eventId()).isEmpty());
        assertThat(this.recorder.attempts(audited.eventId()))
                .as("auditThing's message was held before its first attempt, by the halt recordThing's binding found")
                .hasSize(1)
                .allSatisfy(attempt -> assertThat(attempt.failure()).isNull());
        assertThat(this.outage.halt()).isNull();
        DESTINATIONS
                .values()
                .forEach(destination -> assertThat(rabbit.messageCount(destination + "." + GROUP + ".dlq"))
                        .as("nothing dead-lettered from " + destination)
                        .isZero());
    }

    private int count(String table, EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM " + table + " WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
