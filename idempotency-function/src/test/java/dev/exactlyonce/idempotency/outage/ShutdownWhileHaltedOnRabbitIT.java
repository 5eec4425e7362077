package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

/**
 * A service stopped while consumption is halted, on a real RabbitMQ (a quorum queue, which counts each delivery): the
 * message it holds is given back once a second at most ({@code ConsumptionHalt.HOLD_WHILE_STOPPING}), not given back and
 * delivered again and again until the listener container stops (each time a delivery that RabbitMQ 4.0 to 4.2 count
 * against the queue's delivery limit), however long the service's other beans take to stop between the library's
 * outage and the bindings (2 s here).
 */
class ShutdownWhileHaltedOnRabbitIT {

    /** The service, with a bean of its own that takes a while to stop, before the bindings do. */
    @Configuration(proxyBeanMethods = false)
    @Import(GiveBacksOnRabbitIT.Service.class)
    static class Service {

        @Bean
        SmartLifecycle slowToStop() {
            return new SmartLifecycle() {

                private volatile boolean running;

                @Override
                public void start() {
                    this.running = true;
                }

                @Override
                public void stop() {
                    try {
                        // The fault itself: a bean of the service that takes 2 s to stop, not a wait for an outcome.
                        Thread.sleep(2_000);
                    } catch (InterruptedException ex) {
                        Thread.currentThread().interrupt();
                    }
                    this.running = false;
                }

                @Override
                public boolean isRunning() {
                    return this.running;
                }

                /** After the library's outage (the highest phase), before the bindings. */
                @Override
                public int getPhase() {
                    return Integer.MAX_VALUE - 1;
                }
            };
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("shutdown-halted");

    private static final String QUEUE = DESTINATION + ".things";

    private static final TestDatabase database = TestPostgres.newDatabase("shutdownhalted");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void aServiceStoppedWhileHaltedGivesItsMessageBackOnce() {
        rabbit.deleteAtExit(QUEUE);
        ConfigurableApplicationContext service = start();
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        postgres.cut();
        rabbit.publish(DESTINATION, event);
        ConsumptionHalt outage = service.getBean(ConsumptionHalt.class);
        await().atMost(Duration.ofSeconds(10)).until(() -> outage.halt() != null);

        service.close();

        List<GetResponse> left = rabbit.drain(QUEUE);
        assertThat(left).as("the message, back in its queue").hasSize(1);
        Object deliveries = left.get(0).getProps().getHeaders() == null
                ? null
                : left.get(0).getProps().getHeaders().get("x-delivery-count");
        assertThat(deliveries == null ? 0L : ((Number) deliveries).longValue())
                .as("times RabbitMQ delivered it again before the service stopped")
                .isLessThanOrEqualTo(4);
    }

    private static ConfigurableApplicationContext start() {
        String binding = "--spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";
        String rabbitBinding = "--spring.cloud.stream.rabbit.bindings.idempotencyGuardrecordThing-in-0.";
        return new SpringApplicationBuilder(Service.class)
                .web(WebApplicationType.NONE)
                .run(
                        "--spring.datasource.url="
                                + database.jdbcUrl().replaceFirst("//[^/]+/", "//127.0.0.1:" + postgres.port() + "/"),
                        "--spring.datasource.username=" + database.username(),
                        "--spring.datasource.password=" + database.password(),
                        "--spring.datasource.hikari.connection-timeout=500",
                        "--spring.rabbitmq.host=" + rabbit.host(),
                        "--spring.rabbitmq.port=" + rabbit.port(),
                        "--spring.rabbitmq.username=" + rabbit.username(),
                        "--spring.rabbitmq.password=" + rabbit.password(),
                        "--spring.cloud.function.definition=idempotencyGuard|recordThing",
                        "--spring.cloud.stream.default-binder=rabbit",
                        "--idempotency.outage.probe-initial-interval=200ms",
                        "--idempotency.outage.max-hold=60s",
                        "--idempotency.outbox.relay.enabled=false",
                        "--idempotency.purge.enabled=false",
                        binding + "destination=" + DESTINATION,
                        binding + "group=things",
                        binding + "consumer.max-attempts=2",
                        binding + "consumer.back-off-initial-interval=10",
                        rabbitBinding + "consumer.quorum.enabled=true");
    }
}
