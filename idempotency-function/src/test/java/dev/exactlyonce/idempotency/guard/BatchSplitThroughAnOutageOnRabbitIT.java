package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binding.BindingsLifecycleController;
import org.springframework.cloud.stream.binding.BindingsLifecycleController.State;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A batch that failed as a whole, on a real RabbitMQ, whose messages are being tried one at a time when the database
 * goes away (PostgreSQL behind a proxy, cut): once the hold runs out the whole batch is given back, and none of it is
 * dead-lettered before it comes again. The message that failed on its own before the outage is dead-lettered once, when
 * the batch comes again; every other event is applied once.
 */
@SpringBootTest(
        classes = BatchSplitThroughAnOutageOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThings",
            "spring.cloud.stream.default-binder=rabbit",
            "idempotency.batch.max-wait=2s",
            "idempotency.outage.max-hold=1s",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=1s"
        })
@EnableIdempotencyTestKit(testBinder = false)
class BatchSplitThroughAnOutageOnRabbitIT {

    /** A function of the payloads of a batch, which refuses a thing of a negative amount. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<List<ThingHappened>> recordThings(JdbcTemplate jdbcTemplate) {
            return things -> {
                if (things.stream().anyMatch(thing -> thing.amount().signum() < 0)) {
                    throw new IllegalArgumentException("A thing of a negative amount");
                }
                if (things.size() == 1 && CUT.compareAndSet(false, true)) {
                    // The first message tried alone after the poison: the database goes away, for longer than the
                    // delivery's hold.
                    postgres.cut();
                    CompletableFuture.runAsync(
                            postgres::restore, CompletableFuture.delayedExecutor(4, TimeUnit.SECONDS));
                }
                // One statement per thing: the driver's batch path asserts (with -ea, as the tests run) on a
                // connection closed under it, where a statement fails as it would in production.
                things.forEach(thing -> jdbcTemplate.update(
                        "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount()));
            };
        }
    }

    private static final AtomicBoolean CUT = new AtomicBoolean();

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    private static final String DESTINATION = rabbit.uniqueName("batch-split-outage");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    private static final String BINDING = "idempotencyGuardrecordThings-in-0";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("batchsplitoutage").registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        String binding = "spring.cloud.stream.bindings." + BINDING + ".";
        registry.add(binding + "destination", () -> DESTINATION);
        registry.add(binding + "group", () -> "things");
        registry.add(binding + "consumer.batch-mode", () -> "true");
        // A failure of the message's own is not retried: it is dead-lettered at its first.
        registry.add(binding + "consumer.max-attempts", () -> "1");
        registry.add(binding + "consumer.auto-startup", () -> "false");
        registry.add("spring.cloud.stream.rabbit.bindings." + BINDING + ".consumer.receive-timeout", () -> "2000");
    }

    @AfterAll
    static void closeProxy() {
        postgres.close();
    }

    @Autowired
    BindingsLifecycleController bindings;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void aBatchGivenBackDuringAnOutageWhileTriedOneAtATimeDeadLettersItsPoisonOnce() {
        List<EventEnvelope<ThingHappened>> events = new ArrayList<>();
        events.add(event(new BigDecimal("-1")));
        for (int i = 1; i < 20; i++) {
            events.add(event(new BigDecimal("2.500")));
        }
        events.forEach(event -> rabbit.publish(DESTINATION, event));
        this.bindings.changeState(BINDING, State.STARTED);
        try {
            // The test reads the database through the same proxy: not while it is cut.
            await().atMost(Duration.ofSeconds(60))
                    .ignoreExceptions()
                    .untilAsserted(() -> assertThat(effects()).isEqualTo(events.size() - 1));
            await().atMost(Duration.ofSeconds(30))
                    .untilAsserted(() -> assertThat(rabbit.messageCount(QUEUE)).isZero());
        } finally {
            this.bindings.changeState(BINDING, State.STOPPED);
        }
        assertThat(CUT)
                .as("the database went away while the batch was tried one message at a time")
                .isTrue();
        assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                .as("the poison, dead-lettered once: not before the batch was given back, and again after")
                .isEqualTo(1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM (SELECT thing_id FROM thing_effect GROUP BY thing_id HAVING count(*) > 1)"
                                + " AS doubled",
                        Integer.class))
                .as("things applied more than once")
                .isZero();
    }

    private int effects() {
        Integer count =
                this.jdbcTemplate.queryForObject("SELECT count(DISTINCT thing_id) FROM thing_effect", Integer.class);
        return count != null ? count : 0;
    }

    private static EventEnvelope<ThingHappened> event(BigDecimal amount) {
        return new EventEnvelope<>(
                UUID.randomUUID(), ThingHappened.NAME, Instant.now(), new ThingHappened(UUID.randomUUID(), amount));
    }
}
