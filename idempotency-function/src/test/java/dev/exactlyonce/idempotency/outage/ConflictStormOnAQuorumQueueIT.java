package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.io.IOException;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
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
 * A storm of conflicts on a quorum queue with RabbitMQ 4's default delivery limit (20; set to 20 on a 3.x broker): the
 * effect's insert waits for a table lock another transaction holds, past the service's {@code lock_timeout}, so every
 * attempt conflicts, a dozen times over, before it is released. Each try after a conflict's back-off is made in place, on the consumer
 * thread that holds the delivery, within its {@code max-hold}: RabbitMQ sees no return, where each give-back used to be
 * one, and the event is applied once when the lock is released.
 */
@SpringBootTest(
        classes = ConflictStormOnAQuorumQueueIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            "spring.datasource.hikari.connection-init-sql=SET lock_timeout = '100ms'",
            "idempotency.conflicts.max-give-backs=30",
            // Short holds: the storm is a dozen conflicts, not their time.
            "idempotency.conflicts.first-hold=50ms",
            "idempotency.conflicts.longest-hold=1s",
            "idempotency.outbox.relay.enabled=false",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
@DirtiesContext
class ConflictStormOnAQuorumQueueIT {

    /** The service: it records the effect of each thing, and how often RabbitMQ gave its delivery back. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<Message<ThingHappened>> recordThing(JdbcTemplate jdbcTemplate) {
            return message -> {
                tries.incrementAndGet();
                if (message.getHeaders().get("x-delivery-count") instanceof Number count) {
                    returns.accumulateAndGet(count.longValue(), Math::max);
                }
                ThingHappened thing = message.getPayload();
                jdbcTemplate.update(
                        "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
            };
        }
    }

    /** The tries the storm lasts: the binder's first attempts, then a dozen tries again, each conflicting. */
    private static final int STORM_TRIES = 15;

    private static final AtomicInteger tries = new AtomicInteger();

    private static final AtomicLong returns = new AtomicLong();

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("conflict-storm");

    private static final String QUEUE = DESTINATION + ".things";

    private static final TestDatabase database = TestPostgres.newDatabase("conflictstorm");

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(QUEUE);
        rabbit.deleteAtExit(QUEUE + ".dlq");
        String binding = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> "things");
        registry.add(binding + "consumer.back-off-initial-interval", () -> "100");
        String rabbitBinding = "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.";
        registry.add(rabbitBinding + "quorum.enabled", () -> "true");
        if (majorVersion() < 4) {
            registry.add(rabbitBinding + "quorum.delivery-limit", () -> "20");
        }
    }

    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @Test
    void aStormOfConflictsReturnsNothingToTheBrokerAndTheEventIsAppliedOnce() throws SQLException {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        try (java.sql.Connection holder =
                DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password())) {
            holder.setAutoCommit(false);
            try (Statement statement = holder.createStatement()) {
                statement.execute("LOCK TABLE thing_effect IN EXCLUSIVE MODE");
            }
            rabbit.publish(DESTINATION, event);
            await().atMost(Duration.ofSeconds(90))
                    .alias("a storm: the event tried again and again, a dozen conflicts over")
                    .until(() -> tries.get() > STORM_TRIES);
            assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                    .as("dead letters during the storm")
                    .isZero();
            holder.rollback();
        }

        await().atMost(Duration.ofSeconds(30)).until(() -> effects(event) == 1);
        int triesToTheEffect = tries.get();
        await().alias("no more tries once the event is applied: its delivery is acknowledged")
                .during(Duration.ofSeconds(6))
                .atMost(Duration.ofSeconds(8))
                .until(() -> tries.get() == triesToTheEffect);
        assertThat(triesToTheEffect)
                .as("tries of the event, each conflicting until the last")
                .isGreaterThan(10);
        assertThat(returns.get())
                .as("times the event was given back to RabbitMQ over %s tries", tries.get())
                .isZero();
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).as("dead letters").isZero();
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
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
