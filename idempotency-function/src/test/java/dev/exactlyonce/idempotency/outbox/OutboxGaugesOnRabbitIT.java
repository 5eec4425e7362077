package dev.exactlyonce.idempotency.outbox;

import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The outbox's gauges while the relay's runs fail, on a real PostgreSQL and RabbitMQ: the service's role loses the right
 * to mark its outbox's rows published (a grant revoked, for real), every run fails after publishing, and the lag gauge
 * goes on growing rather than freeze at what the last run that succeeded read.
 */
@SpringBootTest(
        classes = OutboxGaugesOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.stream.default-binder=rabbit",
            "spring.cloud.function.definition=",
            "idempotency.outbox.relay.poll-interval=200ms"
        })
@EnableIdempotencyTestKit(testBinder = false)
class OutboxGaugesOnRabbitIT {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final TestDatabase database = TestPostgres.newDatabase("outboxgauges");

    /** The service's own role, owner of its database, whose grant on the outbox the test revokes. */
    private static final String ROLE = database.name() + "_owner";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.server()
                .execute(
                        "CREATE ROLE \"%s\" LOGIN PASSWORD 'gauges'".formatted(ROLE),
                        "ALTER DATABASE \"%s\" OWNER TO \"%s\"".formatted(database.name(), ROLE));
        registry.add("spring.datasource.url", database::jdbcUrl);
        registry.add("spring.datasource.username", () -> ROLE);
        registry.add("spring.datasource.password", () -> "gauges");
        rabbit.registerConnection(registry);
        registry.add("idempotency.outbox.destination", () -> rabbit.topicExchange("outbox-gauges"));
    }

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    Outbox outbox;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    MeterRegistry meterRegistry;

    @Test
    void theLagGaugeGrowsWhileTheRelaysRunsFail() {
        UUID first = emit("first");
        await().atMost(Duration.ofSeconds(30)).until(() -> published(first));

        revoke("UPDATE");
        UUID held;
        try {
            held = emit("held");
            await().atMost(Duration.ofSeconds(30))
                    .alias("the lag gauge, while every run fails to mark what it published")
                    .until(this::lag, lag -> lag > 3);
        } finally {
            grant("UPDATE");
        }

        await().atMost(Duration.ofSeconds(60)).until(() -> published(held));
        await().atMost(Duration.ofSeconds(10))
                .alias("the lag gauge, once a run succeeds again")
                .until(this::lag, lag -> lag < 1);
    }

    private UUID emit(String key) {
        return this.transactions.execute(status -> this.outbox.emit("test.thing.noticed.v1", key, Map.of()));
    }

    private boolean published(UUID id) {
        return Boolean.TRUE.equals(this.jdbc.queryForObject(
                "SELECT published_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, id));
    }

    private double lag() {
        return this.meterRegistry
                .get(MicrometerIdempotencyMetrics.OUTBOX_LAG)
                .gauge()
                .value();
    }

    private static void revoke(String privilege) {
        asSuperuser().execute("REVOKE %s ON outbox_event FROM \"%s\"".formatted(privilege, ROLE));
    }

    private static void grant(String privilege) {
        asSuperuser().execute("GRANT %s ON outbox_event TO \"%s\"".formatted(privilege, ROLE));
    }

    /** The test database as the test kit's user, a superuser, not the service's role. */
    private static JdbcTemplate asSuperuser() {
        return new JdbcTemplate(
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));
    }
}
