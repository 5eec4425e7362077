package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.integration.channel.AbstractMessageChannel;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The record of a dead letter, written as the message is about to be dead-lettered (so that a replay of it is taken
 * back), when the network to the database goes silent at that moment, on a real RabbitMQ with PostgreSQL behind a
 * proxy: the write waits no longer than {@code idempotency.outage.socket-timeout}, an outage that halts the binding and
 * gives the delivery back, rather than the consumer thread waiting for TCP's timeout (about 15 minutes) with nothing
 * reported. Once the network is back the message comes again, fails again, and is dead-lettered with its record.
 */
@SpringBootTest(
        classes = DeadLetterRecordThroughAnOutageOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordThing",
            "spring.cloud.stream.default-binder=rabbit",
            "idempotency.outage.socket-timeout=2s",
            "idempotency.outage.probe-max-interval=1s"
        })
@EnableIdempotencyTestKit(testBinder = false)
class DeadLetterRecordThroughAnOutageOnRabbitIT {

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

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    private static final String DESTINATION = rabbit.uniqueName("dead-letter-record-outage");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".things");

    private static final String BINDING = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.";

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("deadletteroutage").registerDataSource(registry, postgres);
        rabbit.registerConnection(registry);
        registry.add(BINDING + "destination", () -> DESTINATION);
        registry.add(BINDING + "group", () -> "things");
        registry.add(BINDING + "consumer.max-attempts", () -> "3");
        registry.add(BINDING + "consumer.back-off-initial-interval", () -> "100");
    }

    @AfterAll
    static void closeProxy() {
        postgres.close();
    }

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    ApplicationContext context;

    @Test
    void aRecordTheNetworkSilencesIsAnOutageAndTheDeadLetterIsRecordedOnceTheNetworkIsBack() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        // Before the library's interceptors: the network goes silent once the message's tries are spent, as its
        // record is about to be written.
        AtomicBoolean frozen = new AtomicBoolean();
        errorChannel().addInterceptor(0, new ChannelInterceptor() {
            @Override
            public Message<?> preSend(Message<?> message, MessageChannel channel) {
                if (message instanceof ErrorMessage && frozen.compareAndSet(false, true)) {
                    postgres.freeze();
                }
                return message;
            }
        });
        // Three tries before the network goes silent, three more once it is back.
        this.probe.failNext("recordThing", 6);

        try {
            rabbit.publish(DESTINATION, event);

            await().atMost(Duration.ofSeconds(30)).untilTrue(frozen);
            await().atMost(Duration.ofSeconds(20))
                    .alias("the record's write, on a silent network, is an outage")
                    .untilAsserted(() -> assertThat(this.outage.halt()).isNotNull());
        } finally {
            postgres.thaw();
        }

        await().atMost(Duration.ofSeconds(60))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(1));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM processed_event_dead_letter WHERE event_id = ?",
                        Integer.class,
                        event.eventId()))
                .as("dead-lettered with its record")
                .isEqualTo(1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId()))
                .isZero();
        assertThat(this.probe.invocations("recordThing")).isEqualTo(6);
    }

    /** The binding's error channel, {@code <binder>.<binding>.errors}, where the library records dead letters. */
    private AbstractMessageChannel errorChannel() {
        return this.context.getBeansOfType(AbstractMessageChannel.class).entrySet().stream()
                .filter(channel -> channel.getKey().endsWith(".idempotencyGuardrecordThing-in-0.errors"))
                .map(Map.Entry::getValue)
                .findFirst()
                .orElseThrow();
    }
}
