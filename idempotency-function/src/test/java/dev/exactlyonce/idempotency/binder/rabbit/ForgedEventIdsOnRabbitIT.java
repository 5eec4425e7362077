package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventName;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * An event id taken by a neighbour's event of another name, on a real RabbitMQ. The neighbour sees the ids of events it
 * does not own (stock sees every order's id) and may publish events of its own name under its own routing key: it
 * publishes one with the id of a genuine event the service has not yet processed (one waiting in a dead-letter queue
 * for a replay, say). The service handles both names with the service's key scope, so both claims share one scope. The
 * neighbour's event is applied (it is the neighbour's to publish), and the genuine event is applied too: a claim is
 * the event's id and its name, so an id of another name does not make it a duplicate. A copy of either is still
 * discarded.
 */
@SpringBootTest(
        classes = ForgedEventIdsOnRabbitIT.Service.class,
        properties = {
            "spring.config.name=minimal-service",
            "spring.cloud.function.definition=idempotencyGuard|recordThing;idempotencyGuard|noticeNeighbour"
        })
@EnableIdempotencyTestKit(testBinder = false)
class ForgedEventIdsOnRabbitIT {

    @EventName(NeighbourNoticed.NAME)
    record NeighbourNoticed(UUID thingId) {

        static final String NAME = "test.neighbour.noticed.v1";
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }

        @Bean
        Consumer<NeighbourNoticed> noticeNeighbour(JdbcTemplate jdbcTemplate) {
            return noticed ->
                    jdbcTemplate.update("INSERT INTO thing_effect (thing_id, amount) VALUES (?, 0)", noticed.thingId());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.topicExchange("forged-ids");

    private static final String THINGS = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    private static final String NEIGHBOURS = "spring.cloud.stream.bindings.idempotencyGuardnoticeNeighbour-in-0.";

    private static final String RABBIT = "spring.cloud.stream.rabbit.bindings.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("forgedids").registerDataSource(registry);
        rabbit.registerConnection(registry);
        rabbit.deleteAtExit(DESTINATION + ".things");
        rabbit.deleteAtExit(DESTINATION + ".neighbours");
        registry.add(THINGS + "destination", () -> DESTINATION);
        registry.add(THINGS + "group", () -> "things");
        registry.add(
                RABBIT + "idempotencyGuardrecordThing-in-0.consumer.binding-routing-key", () -> ThingHappened.NAME);
        registry.add(NEIGHBOURS + "destination", () -> DESTINATION);
        registry.add(NEIGHBOURS + "group", () -> "neighbours");
        registry.add(
                RABBIT + "idempotencyGuardnoticeNeighbour-in-0.consumer.binding-routing-key",
                () -> NeighbourNoticed.NAME);
    }

    @Autowired
    DeliveryRecorder deliveries;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void anIdTakenByAnEventOfAnotherNameDoesNotSuppressTheGenuineEvent() {
        EventEnvelope<ThingHappened> genuine = Things.thingHappened();
        EventEnvelope<NeighbourNoticed> neighbours = new EventEnvelope<>(
                genuine.eventId(),
                NeighbourNoticed.NAME,
                Instant.now(),
                new NeighbourNoticed(genuine.payload().thingId()));

        rabbit.publish(DESTINATION, neighbours);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(amounts(genuine)).containsExactly(BigDecimal.ZERO.setScale(3)));

        rabbit.publish(DESTINATION, genuine);
        rabbit.publish(DESTINATION, genuine);
        rabbit.publish(DESTINATION, neighbours);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.deliveries.attempts(genuine.eventId()))
                        .as("the neighbour's event, the genuine event, a copy of each")
                        .hasSize(4)
                        .allSatisfy(attempt -> assertThat(attempt.failure()).isNull()));
        assertThat(amounts(genuine))
                .as("the genuine event applied once, the neighbour's once, their copies discarded")
                .containsExactlyInAnyOrder(BigDecimal.ZERO.setScale(3), new BigDecimal("2.500"));
    }

    private List<BigDecimal> amounts(EventEnvelope<ThingHappened> event) {
        return this.jdbcTemplate.queryForList(
                "SELECT amount FROM thing_effect WHERE thing_id = ?",
                BigDecimal.class,
                event.payload().thingId());
    }
}
