package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * A guarded binding on a real RabbitMQ whose rejected messages would have nowhere to go, configured as minimally as
 * README's getting-started ({@code minimal-service.yml}): the library cannot give it a dead-letter queue, so the service refuses
 * to start, saying what to set, rather than let the broker drop what the guard rejects. That is a queue declared
 * earlier without a dead-letter queue (by a version that ran without {@code auto-bind-dlq}: RabbitMQ refuses to
 * declare an existing queue again with a dead-letter exchange), a binding without a group (its queue is anonymous,
 * deleted with the service, and the binder gives it no dead-letter queue), and a queue that is not durable (the binder
 * gives it none either). {@code auto-bind-dlq: false}, set by the
 * service, says it does without: then it starts and consumes as before.
 */
class ExistingQueueWithoutDeadLetterQueueIT {

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

    private static final TestDatabase database = TestPostgres.newDatabase("upgraded");

    private static final String GROUP = "things";

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    private static final String RABBIT_BINDING =
            "spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.consumer.";

    @Test
    void aQueueThatExistsWithoutADeadLetterQueueRefusesStartupSayingWhatToDo() {
        String destination = rabbit.uniqueName("upgraded");
        declaredWithoutDeadLetterExchange(destination + "." + GROUP);

        assertThat(startupFailure(BINDING + "destination=" + destination, BINDING + "group=" + GROUP))
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("Binding idempotencyGuardrecordThing-in-0 has no dead-letter queue: its queue "
                        + destination + "." + GROUP + " exists without " + destination + "." + GROUP + ".dlq")
                .hasMessageContaining("Drain the queue and delete it")
                .hasMessageContaining(RABBIT_BINDING + "auto-bind-dlq=true")
                .hasMessageContaining("set it to false");
    }

    @Test
    void aQueueThatExistsWithoutADeadLetterQueueIsConsumedAsBeforeWhenTheServiceSaysItDoesWithout() {
        String destination = rabbit.uniqueName("upgraded");
        declaredWithoutDeadLetterExchange(destination + "." + GROUP);
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        try (ConfigurableApplicationContext service = start(
                BINDING + "destination=" + destination,
                BINDING + "group=" + GROUP,
                RABBIT_BINDING + "auto-bind-dlq=false")) {
            rabbit.publish(destination, event);

            JdbcTemplate jdbc = service.getBean(JdbcTemplate.class);
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> jdbc.queryForObject(
                                    "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                                    Integer.class,
                                    event.payload().thingId())
                            == 1);
        }
    }

    @Test
    void aBindingWithoutAGroupRefusesStartupSayingWhichPropertyToSet() {
        String destination = rabbit.uniqueName("anonymous");

        assertThat(startupFailure(BINDING + "destination=" + destination))
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("Binding idempotencyGuardrecordThing-in-0 has no group")
                .hasMessageContaining(BINDING + "group=");
    }

    @Test
    void aBindingWhoseQueueIsNotDurableRefusesStartupSayingWhichPropertyToRemove() {
        String destination = rabbit.uniqueName("transient");

        assertThat(startupFailure(
                        BINDING + "destination=" + destination,
                        BINDING + "group=" + GROUP,
                        RABBIT_BINDING + "durable-subscription=false"))
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("Binding idempotencyGuardrecordThing-in-0 has no dead-letter queue: its queue is"
                        + " not durable")
                .hasMessageContaining("Remove " + RABBIT_BINDING + "durable-subscription=false");
    }

    private static Throwable startupFailure(String... properties) {
        return deployment(properties).startupFailure();
    }

    private static ConfigurableApplicationContext start(String... properties) {
        return deployment(properties).start();
    }

    private static Deployment deployment(String... properties) {
        return Deployment.of(Service.class)
                .on(database)
                .on(rabbit)
                .with("spring.config.name=minimal-service")
                .with(properties);
    }

    private static void declaredWithoutDeadLetterExchange(String queue) {
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueDeclare(rabbit.deleteAtExit(queue), true, false, false, Map.of());
        } catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
    }
}
