package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
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
 * A long outage on a real RabbitMQ, with a short {@code max-hold}: the message is given back to the broker once, and
 * the binding then stops taking deliveries while PostgreSQL is away (RabbitMQ counts each return), rather than being
 * handed the message again every {@code max-hold}. The log says so once, when consumption halts, and once when it
 * resumes; the listener container logs nothing of the give-back (its error handler logs each failure at WARN with a
 * stack trace), and the message is applied once, nothing dead-lettered.
 */
@SpringBootTest(
        classes = GiveBacksOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            "spring.datasource.hikari.connection-timeout=500",
            "spring.datasource.hikari.validation-timeout=250",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=300ms",
            "idempotency.outbox.relay.enabled=false",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes what the context connects through: the context must not stay cached.
@DirtiesContext
class GiveBacksOnRabbitIT {

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

    private static final String DESTINATION = rabbit.uniqueName("give-backs");

    private static final String QUEUE = DESTINATION + ".things";

    private static final TestDatabase database = TestPostgres.newDatabase("givebacks");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(QUEUE);
        String binding = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> "things");
        registry.add(binding + "consumer.max-attempts", () -> "2");
        registry.add(binding + "consumer.back-off-initial-interval", () -> "10");
    }

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    MeterRegistry meterRegistry;

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void aMessageGivenBackOnceLogsTheHaltOnceAndNoStackTrace() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        postgres.cut();

        rabbit.publish(DESTINATION, event);
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        await().alias("the message held past max-hold and given back")
                .atMost(Duration.ofSeconds(20))
                .until(() -> givenBack() >= 1);
        await().alias("ten times max-hold more, with the binding taking no delivery")
                .during(Duration.ofSeconds(3))
                .atMost(Duration.ofSeconds(5))
                .until(() -> givenBack() == 1);
        postgres.restore();

        await().atMost(Duration.ofSeconds(20)).until(() -> effects(event) == 1);
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() == null);
        assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                .as("nothing dead-lettered")
                .isZero();
        // The binding's consumer threads' lines and the halt's, the pool's own aside (it says once per connection
        // that the connection broke, with the driver's exception).
        List<ILoggingEvent> ours = this.logs.events().stream()
                .filter(log -> log.getThreadName().startsWith(QUEUE)
                        || log.getLoggerName().equals(ConsumptionHalt.class.getName()))
                .filter(log -> !log.getLoggerName().startsWith("com.zaxxer.hikari"))
                .toList();
        assertThat(ours)
                .as("no line at WARN or above with a stack trace, on the binding's consumer threads or from the halt")
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .allSatisfy(log -> assertThat(log.getThrowableProxy())
                        .as("%s: %s", log.getLoggerName(), log.getFormattedMessage())
                        .isNull());
        assertThat(ours)
                .as("one WARN line when consumption halts, none for the give-back or the binding stopping")
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .singleElement()
                .satisfies(log -> assertThat(log.getFormattedMessage()).contains("halts"));
        assertThat(ours)
                .as("one INFO line when it resumes")
                .filteredOn(log -> log.getLoggerName().equals(ConsumptionHalt.class.getName()))
                .filteredOn(log -> log.getLevel() == Level.INFO)
                .singleElement()
                .satisfies(log -> assertThat(log.getFormattedMessage()).contains("resumes"));
    }

    private double givenBack() {
        return this.meterRegistry.find(MicrometerIdempotencyMetrics.GIVEN_BACK).counters().stream()
                .mapToDouble(counter -> counter.count())
                .sum();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
