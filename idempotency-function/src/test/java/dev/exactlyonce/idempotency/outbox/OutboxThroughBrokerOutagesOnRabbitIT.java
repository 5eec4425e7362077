package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.ShutdownSignalException;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The outbox relay while the broker, or the destination, is away, on a real RabbitMQ and PostgreSQL: a broker that
 * cannot be reached, a missing exchange, a routing key the relay's user may not publish, a full queue that rejects what
 * it is given. Each lasts longer than {@code max-attempts} refusals of a row would take to park it; none is the row's
 * fault, so nothing counts as an attempt, nothing is parked, and once the condition ends every event is published, each
 * key's in the order written.
 *
 * <p>The faults last {@code -Doutbox.outage=PT10S} (ten seconds) each; {@code -Doutbox.outage=PT10M} runs them as
 * an operator would meet them.
 */
@SpringBootTest(
        classes = OutboxThroughBrokerOutagesOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.stream.default-binder=rabbit",
            "spring.cloud.function.definition=",
            "idempotency.outbox.relay.confirm-timeout=1s",
            // Two refusals park a row: every fault below lasts long enough for ten, and for five tries of a hold.
            "idempotency.outbox.relay.max-attempts=2",
            "idempotency.outbox.relay.longest-hold=2s"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes the proxy the context connects through.
@DirtiesContext
class OutboxThroughBrokerOutagesOnRabbitIT {

    static final String EVENT = "test.thing.noticed.v1";

    /** An event whose routing key the relay's user is refused (403) for as long as a test says. */
    static final String FORBIDDEN_EVENT = "test.thing.forbidden.v1";

    static final Duration OUTAGE = Duration.parse(System.getProperty("outbox.outage", "PT10S"));

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    private static final TestRabbit rabbit = TestRabbit.broker();

    /** The service reaches the broker through it: cut, the broker refuses connections as a stopped one does. */
    private static final TcpProxy brokerProxy = TcpProxy.to(rabbit.host(), rabbit.port());

    private static final String OUTPUT = rabbit.topicExchange("outages-out");

    private static final String EMITTED = rabbit.uniqueName("outages-emitted");

    /** Where what the output routes to no queue goes, once a test declared it so: on to the consumer's queue. */
    private static final String UNROUTED = rabbit.uniqueName("outages-unrouted");

    /** A queue that holds nothing and rejects what it is given, bound to the output while a test says. */
    private static final String FULL_QUEUE = rabbit.uniqueName("outages-full");

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    /** The event ids in the order they first reached the consumer. */
    private static final Set<UUID> arrivals = java.util.Collections.synchronizedSet(new LinkedHashSet<>());

    private static Connection consumer;

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("outboxoutages").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
        registry.add("spring.rabbitmq.port", brokerProxy::port);
        registry.add("idempotency.outbox.destination", () -> OUTPUT);
        // The exchange is the broker's, as in a deployment: a relay allowed to declare it declares it again while it
        // is missing, on its next connection, and what it published then would be routed to no queue. The binding's
        // name holds dots: in brackets, it is one key of the map, not a path into it.
        registry.add("spring.cloud.stream.rabbit.bindings[" + OUTPUT + "].producer.declare-exchange", () -> "false");
    }

    @BeforeAll
    static void queues() throws Exception {
        consumer = rabbit.newConnection();
        Channel channel = consumer.createChannel();
        channel.queueDeclare(FULL_QUEUE, true, false, false, Map.of("x-max-length", 0, "x-overflow", "reject-publish"));
        channel.queueDeclare(EMITTED, true, false, false, Map.of());
        channel.exchangeDeclare(OUTPUT, "topic", true);
        channel.queueBind(EMITTED, OUTPUT, "#");
        channel.exchangeDeclare(UNROUTED, "fanout", true);
        channel.queueBind(EMITTED, UNROUTED, "");
        channel.basicConsume(EMITTED, true, new DefaultConsumer(channel) {
            @Override
            public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
                arrivals.add(CODEC.decode(body).eventId());
            }
        });
    }

    @AfterAll
    static void closeConsumer() throws Exception {
        consumer.close();
        brokerProxy.close();
    }

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    Outbox outbox;

    @BeforeEach
    void emptyOutbox() {
        // Rows a test left (it failed) are gone: an event of theirs that still arrives is none of the next test's.
        this.jdbc.update("DELETE FROM outbox_event");
        arrivals.clear();
    }

    @Test
    void aBrokerThatCannotBeReachedParksNothingAndEachKeyIsPublishedInOrderOnceItIsBack() {
        emit(EVENT, "before", 1_000, 2);
        brokerProxy.cut();
        try {
            emit(EVENT, "during", 100, 2);
            assertNothingParkedFor(OUTAGE);
        } finally {
            brokerProxy.restore();
        }

        assertEveryEventPublishedInOrderWithoutAnAttempt();
    }

    @Test
    void aMissingExchangeParksNothingAndEachKeyIsPublishedInOrderOnceItIsDeclared() throws Exception {
        // The relay's binding to the exchange exists (its first publication created it): a deployment
        // then deletes the exchange and declares it again.
        emit(EVENT, "warm-up", 1, 1);
        assertEveryEventPublishedInOrderWithoutAnAttempt();
        try (Channel channel = consumer.createChannel()) {
            channel.exchangeDelete(OUTPUT);
        }
        emit(EVENT, "missing-exchange", 200, 2);
        try {
            // The relay's connections dropped meanwhile (a node restarted with the deployment): it connects again
            // while the exchange is missing, and a relay that declared it would declare it again then.
            int connections = brokerProxy.connections();
            brokerProxy.cut();
            brokerProxy.restore();
            assertNothingParkedFor(OUTAGE);
            assertThat(brokerProxy.connections())
                    .as("connections the relay opened again while the exchange was missing")
                    .isGreaterThan(connections);
            assertThat(exchangeExists(OUTPUT))
                    .as("the exchange, declared by no one while it was missing (the relay declares none)")
                    .isFalse();
            try (Channel channel = consumer.createChannel()) {
                // Declared with its queue's binding after it: what reaches it in between goes on to its alternate
                // exchange, and the consumer. None is lost here, whatever the timing.
                channel.exchangeDeclare(OUTPUT, "topic", true, false, Map.of("alternate-exchange", UNROUTED));
                channel.queueBind(EMITTED, OUTPUT, "#");
            }
            assertEveryEventPublishedInOrderWithoutAnAttempt();
        } finally {
            // As the other tests expect it, declared as the binder declares it: nothing is published meanwhile.
            try (Channel channel = consumer.createChannel()) {
                channel.exchangeDelete(OUTPUT);
                channel.exchangeDeclare(OUTPUT, "topic", true);
                channel.queueBind(EMITTED, OUTPUT, "#");
            }
        }
    }

    @Test
    void aRoutingKeyTheRelaysUserMayNotPublishParksNothingAndItsEventsArePublishedOnceAllowed() {
        rabbit.control("set_topic_permissions", "-p", "/", rabbit.username(), OUTPUT, "^" + EVENT + "$", ".*");
        try {
            emit(FORBIDDEN_EVENT, "forbidden", 200, 2);
            emit(EVENT, "allowed", 100, 1);
            assertNothingParkedFor(OUTAGE);
        } finally {
            rabbit.control("clear_topic_permissions", "-p", "/", rabbit.username(), OUTPUT);
        }

        assertEveryEventPublishedInOrderWithoutAnAttempt();
    }

    @Test
    void aFullQueueThatRejectsWhatItIsGivenParksNothingAndItsEventsArePublishedOnceItTakesThem() throws Exception {
        try (Channel channel = consumer.createChannel()) {
            channel.queueBind(FULL_QUEUE, OUTPUT, EVENT);
        }
        try {
            emit(EVENT, "full-queue", 200, 2);
            assertNothingParkedFor(OUTAGE);
        } finally {
            try (Channel channel = consumer.createChannel()) {
                channel.queueUnbind(FULL_QUEUE, OUTPUT, EVENT);
            }
        }

        assertEveryEventPublishedInOrderWithoutAnAttempt();
    }

    /** Events of {@code keys} keys, {@code perKey} each (in their order), in transactions of 100 keys. */
    private void emit(String eventName, String prefix, int keys, int perKey) {
        emit(OUTPUT, eventName, prefix, keys, perKey);
    }

    private void emit(String destination, String eventName, String prefix, int keys, int perKey) {
        for (int from = 0; from < keys; from += 100) {
            List<OutgoingEvent> events = new ArrayList<>();
            for (int n = 0; n < perKey; n++) {
                int event = n;
                IntStream.range(from, Math.min(keys, from + 100))
                        .forEach(key ->
                                events.add(new OutgoingEvent(eventName, prefix + "-" + key, Map.of("n", event))));
            }
            this.transactions.executeWithoutResult(status -> this.outbox.write(destination, events));
        }
    }

    /** Keeps the fault on for that long, checking all the while that the relay parks nothing. */
    private void assertNothingParkedFor(Duration outage) {
        // Spring AMQP's threads throw on the channels the broker closes: theirs, not the test's.
        await().dontCatchUncaughtExceptions()
                .during(outage)
                .atMost(outage.plusSeconds(30))
                .pollInterval(Duration.ofMillis(500))
                .until(() -> parked() == 0);
    }

    private void assertEveryEventPublishedInOrderWithoutAnAttempt() {
        await().dontCatchUncaughtExceptions()
                .atMost(Duration.ofSeconds(120))
                .alias("every event published once the condition ended")
                .until(() -> unpublished() == 0);
        assertThat(this.jdbc.queryForList("SELECT aggregateid, attempts, parked_at, last_error FROM outbox_event"
                        + " WHERE attempts > 0 OR parked_at IS NOT NULL"))
                .as("rows that counted an attempt, or were parked")
                .isEmpty();
        Map<String, List<UUID>> written = new LinkedHashMap<>();
        this.jdbc.query("SELECT aggregateid, id FROM outbox_event ORDER BY position", row -> {
            written.computeIfAbsent(row.getString(1), key -> new ArrayList<>()).add(row.getObject(2, UUID.class));
        });
        await().dontCatchUncaughtExceptions()
                .atMost(Duration.ofSeconds(30))
                .alias("every event reached the consumer")
                .until(() -> arrivals.containsAll(
                        written.values().stream().flatMap(List::stream).toList()));
        List<UUID> arrived;
        synchronized (arrivals) {
            arrived = List.copyOf(arrivals);
        }
        written.forEach(
                (key, ids) -> assertThat(arrived.stream().filter(ids::contains).toList())
                        .as("the events of key %s, first arrivals, in the order written", key)
                        .containsExactlyElementsOf(ids));
    }

    private static boolean exchangeExists(String exchange) throws Exception {
        try (Channel channel = consumer.createChannel()) {
            channel.exchangeDeclarePassive(exchange);
            return true;
        } catch (IOException ex) {
            if (ex.getCause() instanceof ShutdownSignalException closed
                    && closed.getReason() instanceof AMQP.Channel.Close close
                    && close.getReplyCode() == AMQP.NOT_FOUND) {
                return false;
            }
            throw ex;
        }
    }

    private int unpublished() {
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class);
    }

    private int parked() {
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox_event WHERE parked_at IS NOT NULL", Integer.class);
    }
}
