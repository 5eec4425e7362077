package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.MessageChannel;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A service upgraded to this library version while its queue already exists without a dead-letter queue (declared by
 * a version that ran without {@code auto-bind-dlq}): the library leaves the binding's {@code auto-bind-dlq} off, since
 * RabbitMQ refuses to declare an existing queue again with a dead-letter exchange (406), which would break the
 * binding's declarations and its dead-lettering; it says so in a WARN line, and the binding consumes as before.
 */
@SpringBootTest(
        classes = ExistingQueueWithoutDeadLetterQueueIT.Service.class,
        properties = "spring.config.name=minimal-service")
@EnableIdempotencyTestKit(testBinder = false)
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

    private static final String DESTINATION = rabbit.uniqueName("upgraded");

    private static final String GROUP = "things";

    private static final String QUEUE = declaredWithoutDeadLetterExchange(DESTINATION + "." + GROUP);

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("upgraded").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> GROUP);
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    BinderFactory binders;

    @Test
    void theExistingQueueIsLeftAsItIsAndConsumedAsBefore() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(DESTINATION, event);

        assertThat(((ExtendedPropertiesBinder<?, ?, ?>) this.binders.getBinder(null, MessageChannel.class))
                        .getExtendedConsumerProperties("idempotencyGuardrecordThing-in-0"))
                .as("auto-bind-dlq left off")
                .hasFieldOrPropertyWithValue("autoBindDlq", false);
        await().atMost(Duration.ofSeconds(30))
                .until(() -> this.jdbcTemplate.queryForObject(
                                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                                Integer.class,
                                event.payload().thingId())
                        == 1);
    }

    private static String declaredWithoutDeadLetterExchange(String queue) {
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, true, false, false, Map.of());
        } catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
        return rabbit.deleteAtExit(queue);
    }
}
