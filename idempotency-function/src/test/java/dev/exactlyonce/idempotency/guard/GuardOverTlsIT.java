package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A service that reaches its broker and its database with TLS only, each server's certificate verified against the
 * authority named by {@code TLS_CA_FILE}, host name included (what {@code infra/tls.sh} sets up on the local PostgreSQL
 * and RabbitMQ 4 node; without it the test is skipped): Spring Boot's SSL bundle for AMQP
 * ({@code spring.rabbitmq.ssl.bundle}) and the PostgreSQL driver's {@code sslmode=verify-full}, as
 * docs/operations.md shows. The guard's claim and the effect commit in one transaction over the encrypted connection,
 * and a copy of the event has no effect.
 */
@SpringBootTest(
        classes = GuardOverTlsIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            "spring.rabbitmq.ssl.enabled=true",
            "spring.rabbitmq.ssl.bundle=servers",
            "spring.ssl.bundle.pem.servers.truststore.certificate=file:${TLS_CA_FILE}",
            "spring.datasource.hikari.data-source-properties.sslmode=verify-full",
            "spring.datasource.hikari.data-source-properties.sslrootcert=${TLS_CA_FILE}"
        })
@EnableIdempotencyTestKit(testBinder = false)
@EnabledIfEnvironmentVariable(named = "TLS_CA_FILE", matches = ".+")
class GuardOverTlsIT {

    /** Whether each effect's connection to the database was encrypted, as the database saw it. */
    static final List<Boolean> encryptedEffects = new CopyOnWriteArrayList<>();

    /** The service: a function of one event that writes its effect, and Spring Boot's auto-configuration. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> {
                jdbcTemplate.update(
                        "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
                encryptedEffects.add(jdbcTemplate.queryForObject(
                        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", Boolean.class));
            };
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("over-tls");

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("overtls").registerDataSource(registry);
        rabbit.registerConnection(registry);
        // The broker's TLS listener only: a plain AMQP connection is refused there.
        registry.add("spring.rabbitmq.port", () -> System.getenv("RABBITMQ_TLS_PORT"));
        rabbit.deleteAtExit(DESTINATION + ".things");
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
    }

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void anEventDeliveredTwiceOverTlsHasOneEffectCommittedOverTls() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(DESTINATION, event);
        rabbit.publish(DESTINATION, event);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.recorder.attempts(event.eventId()))
                        .hasSize(2)
                        .allSatisfy(attempt -> assertThat(attempt.failure()).isNull()));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId()))
                .isEqualTo(1);
        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(encryptedEffects).containsExactly(true);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", Boolean.class))
                .as("the service's pool connects with TLS")
                .isTrue();
    }
}
