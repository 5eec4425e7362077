package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A service that only emits (a REST controller's {@code @Transactional} method, say), with the library and no
 * function: the outbox works, and nothing is consumed on its behalf.
 */
@SpringBootTest(
        classes = OutboxWithoutGuardedFunctionsIT.Service.class,
        properties = {
            "spring.cloud.stream.default-binder=rabbit",
            // The test resources' application.yml names one; this service has none.
            "spring.cloud.function.definition="
        })
@EnableIdempotencyTestKit(testBinder = false)
class OutboxWithoutGuardedFunctionsIT {

    /** No function at all. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.topicExchange("emit-only");

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("emitonly").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add("idempotency.outbox.destination", () -> EXCHANGE);
    }

    @Autowired
    ApplicationContext context;

    @Autowired
    BindingService bindings;

    @Autowired
    Outbox outbox;

    @Autowired
    TransactionTemplate transactions;

    @Test
    void itEmitsAndConsumesNothing() throws Exception {
        assertThat(this.bindings.getConsumerBindingNames())
                .as("the guard, a Function bean, was not bound as the service's function")
                .isEmpty();
        String queue = rabbit.uniqueName("emit-only-events");
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueDeclare(queue, false, false, true, Map.of());
            channel.queueBind(queue, EXCHANGE, "#");
        }

        UUID eventId = this.transactions.execute(status -> this.outbox.emit("test.thing.noticed.v1", "k", Map.of()));

        await().atMost(Duration.ofSeconds(30)).until(() -> rabbit.messageCount(queue) == 1);
        assertThat(new EnvelopeCodec()
                        .decode(rabbit.drain(queue).get(0).getBody())
                        .eventId())
                .isEqualTo(eventId);
    }
}
