package dev.exactlyonce.infra;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.BrokerAdministration;
import dev.exactlyonce.infra.shop.ShopBrokerPolicies;
import dev.exactlyonce.infra.shop.ShopBrokerUsers;
import dev.exactlyonce.infra.shop.ShopScenario;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The shop's broker users on a real RabbitMQ, with the shop's topology of a run of its own: each user tries what it
 * must not do, and the broker refuses it (403 ACCESS_REFUSED); what each needs, it may.
 */
class BrokerPermissionsIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String SUFFIX =
            "_perm" + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000));

    private static final String EXCHANGE = "events" + SUFFIX;

    /** The dead-letter queues' bound in this run: the shop's policy, with a size a test fills in a moment. */
    private static final long DEAD_LETTER_BYTES = 1L << 20;

    private static final BrokerAdministration administration =
            BrokerAdministration.of(rabbit.host(), rabbit.username(), rabbit.password());

    @BeforeAll
    static void topologyAndUsers() throws Exception {
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.exchangeDeclare(rabbit.deleteAtExit(EXCHANGE), "topic", true);
            for (String service : List.of("stock", "shipping", "billing")) {
                channel.exchangeDeclare(rabbit.deleteAtExit(deadLetterExchange(service)), "direct", true);
                String queue = rabbit.deleteAtExit(queue(service));
                channel.queueDeclare(queue, true, false, false, Map.of("x-queue-type", "quorum"));
                channel.queueDeclare(queue + ".dlq", true, false, false, Map.of("x-queue-type", "quorum"));
            }
        }
        for (String service : List.of("stock", "shipping", "billing")) {
            ReplayExchanges.declareAndBind(rabbit, queue(service));
        }
        ShopBrokerUsers.users(SUFFIX).forEach(administration::createUser);
        ShopBrokerPolicies.policies(SUFFIX, DEAD_LETTER_BYTES).forEach(administration::createPolicy);
    }

    @AfterAll
    static void dropUsers() {
        ShopBrokerUsers.users(SUFFIX).forEach(user -> administration.deleteUser(user.name()));
        ShopBrokerPolicies.policies(SUFFIX).forEach(policy -> administration.deletePolicy(policy.name()));
    }

    @Test
    void stocksUserCannotConsumeFromShippingsQueue() throws Exception {
        try (Connection stock = connectAs("stock")) {
            assertRefused(() -> stock.createChannel().basicGet(queue("shipping"), false));
            assertRefused(() -> stock.createChannel().basicConsume(queue("shipping"), (tag, message) -> {}, tag -> {}));
        }
    }

    @Test
    void stocksUserCannotDeleteOrPurgeBillingsDeadLetterQueue() throws Exception {
        try (Connection stock = connectAs("stock")) {
            assertRefused(() -> stock.createChannel().queuePurge(queue("billing") + ".dlq"));
            assertRefused(() -> stock.createChannel().queueDelete(queue("billing") + ".dlq"));
        }
    }

    @Test
    void stocksUserCannotPublishToAnotherServicesQueue() throws Exception {
        try (Connection stock = connectAs("stock")) {
            assertRefused(() -> publish(stock, "", queue("shipping")));
            assertRefused(() -> publish(stock, EXCHANGE, "order.order.placed.v1"));
        }
    }

    @Test
    void stocksUserCannotDeadLetterIntoBillingsDeadLetterQueueNorTakeCopiesOfItsDeadLetters() throws Exception {
        String billing = queue("billing");
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            // As billing's binder binds it: its dead-letter queue, by its queue's name, on its dead-letter exchange.
            channel.queueBind(billing + ".dlq", deadLetterExchange("billing"), billing);
        }
        try (Connection stock = connectAs("stock")) {
            assertRefused(() -> publish(stock, deadLetterExchange("billing"), billing));
            assertRefused(() -> {
                try (Channel channel = stock.createChannel()) {
                    channel.queueBind(queue("stock"), deadLetterExchange("billing"), billing);
                }
            });
        }
        assertThat(rabbit.messageCount(billing + ".dlq"))
                .as("nothing stock published reached billing's dead letters")
                .isZero();
    }

    @Test
    void stocksRelayPublishesItsOwnEventToTheExchangeAndNoOtherAndTheOrderRelayNotStocks() throws Exception {
        String shipping = queue("shipping");
        rabbit.purge(shipping);
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueBind(shipping, EXCHANGE, ShopScenario.STOCK_RESERVED);
        }
        try (Connection stock = connectAs("stock-relay")) {
            publish(stock, EXCHANGE, ShopScenario.STOCK_RESERVED);
            assertRefused(() -> publish(stock, EXCHANGE, "order.order.status-changed.v1"));
        }
        try (Connection relay = connectAs("relay")) {
            assertRefused(() -> publish(relay, EXCHANGE, ShopScenario.STOCK_RESERVED));
        }
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueUnbind(shipping, EXCHANGE, ShopScenario.STOCK_RESERVED);
        }
        assertThat(rabbit.drain(shipping))
                .extracting(message -> message.getEnvelope().getRoutingKey())
                .as("stock's event, routed to shipping's queue; not the refused one")
                .containsExactly(ShopScenario.STOCK_RESERVED);
    }

    /**
     * The broker's paths around stock's topic permission: binding the events exchange to stock's dead-letter exchange
     * (a direct exchange, where no topic permission is checked) and publishing an order's event there; declaring an
     * exchange named like its queue, with the events exchange as its alternate exchange. Billing's queue must receive
     * nothing.
     */
    @Test
    void stocksUserCannotRouteAnOrdersEventToTheEventsExchangeThroughAnExchangeOfItsOwn() throws Exception {
        String billing = rabbit.uniqueName("billing.forged");
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueDeclare(rabbit.deleteAtExit(billing), false, false, false, Map.of());
            channel.queueBind(billing, EXCHANGE, "order.order.placed.v1");
        }
        try (Connection stock = connectAs("stock")) {
            attemptQuietly(() -> {
                try (Channel channel = stock.createChannel()) {
                    channel.exchangeBind(EXCHANGE, deadLetterExchange("stock"), "order.order.placed.v1");
                }
            });
            attemptQuietly(() -> publish(stock, deadLetterExchange("stock"), "order.order.placed.v1"));
            attemptQuietly(() -> {
                try (Channel channel = stock.createChannel()) {
                    channel.exchangeDeclare(
                            queue("stock"), "fanout", false, true, Map.of("alternate-exchange", EXCHANGE));
                }
            });
            attemptQuietly(() -> publish(stock, queue("stock"), "order.order.placed.v1"));
        }
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.exchangeUnbind(EXCHANGE, deadLetterExchange("stock"), "order.order.placed.v1");
        }
        assertThat(rabbit.messageCount(billing))
                .as("forged orders that reached billing")
                .isZero();
    }

    @Test
    void stocksConsumerUserCannotPublishToTheEventsExchangeButItsRelayUserCan() throws Exception {
        try (Connection stock = connectAs("stock")) {
            assertRefused(() -> publish(stock, EXCHANGE, ShopScenario.STOCK_RESERVED));
            assertRefused(() -> {
                try (Channel channel = stock.createChannel()) {
                    channel.exchangeBind(EXCHANGE, deadLetterExchange("stock"), "order.order.placed.v1");
                }
            });
        }
        try (Connection stockRelay = connectAs("stock-relay")) {
            publish(stockRelay, EXCHANGE, ShopScenario.STOCK_RESERVED);
            assertRefused(() -> publish(stockRelay, EXCHANGE, "order.order.placed.v1"));
            assertRefused(() -> stockRelay.createChannel().basicGet(queue("stock"), false));
        }
    }

    /**
     * A consumer user binds its own queue to the events exchange with the routing keys of the events its service
     * handles, and no other: not {@code #}, which would route it every event of every service, nor a chain of
     * {@code #} segments, which costs the broker millions of routing steps on every publish to the exchange and stalls
     * every relay (the read side of the users' topic permissions, which RabbitMQ checks on bindings to a topic
     * exchange).
     */
    @ParameterizedTest
    @ValueSource(strings = {"stock", "shipping", "billing"})
    void aConsumerUserCannotBindItsQueueToEventsItsServiceDoesNotHandle(String service) throws Exception {
        String queue = queue(service);
        String chain = String.join(".", Collections.nCopies(40, "#")) + ".zz";
        List<String> keys = List.of("#", chain, "billing.invoice.issued.v1");
        try (Connection user = connectAs(service)) {
            assertRefused(() -> {
                try (Channel channel = user.createChannel()) {
                    channel.queueBind(queue, EXCHANGE, "#");
                }
            });
            assertRefused(() -> {
                try (Channel channel = user.createChannel()) {
                    channel.queueBind(queue, EXCHANGE, chain);
                }
            });
            assertRefused(() -> {
                try (Channel channel = user.createChannel()) {
                    channel.queueBind(queue, EXCHANGE, "billing.invoice.issued.v1");
                }
            });
        } finally {
            // What went through would route the other tests' messages to this queue.
            try (Connection admin = rabbit.newConnection();
                    Channel channel = admin.createChannel()) {
                for (String key : keys) {
                    channel.queueUnbind(queue, EXCHANGE, key);
                }
            }
        }
    }

    /**
     * A service may publish to its own dead-letter exchange, and so fill its dead-letter queue. Unbounded, that raises
     * the broker's disk alarm, which blocks every publisher of the broker, the other services' relays too: the shop's
     * policy bounds the queue and refuses what goes past it ({@code reject-publish}: a negative confirm).
     */
    @Test
    void aServiceFillingItsDeadLetterQueueIsRefusedPastItsBound() throws Exception {
        String deadLetters = queue("stock") + ".dlq";
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            // As stock's binder binds it: its dead-letter queue, by its queue's name, on its dead-letter exchange.
            channel.queueBind(deadLetters, deadLetterExchange("stock"), queue("stock"));
        }
        byte[] body = new byte[64 * 1024];
        boolean refused = false;
        try (Connection stock = connectAs("stock");
                Channel channel = stock.createChannel()) {
            channel.confirmSelect();
            for (int sent = 0; sent < 2 * DEAD_LETTER_BYTES / body.length && !refused; sent++) {
                channel.basicPublish(deadLetterExchange("stock"), queue("stock"), new AMQP.BasicProperties(), body);
                refused = !channel.waitForConfirms(5_000);
            }
        } finally {
            long held = rabbit.messageCount(deadLetters);
            rabbit.purge(deadLetters);
            // The queue takes the message that crosses the bound, and refuses the next.
            assertThat(held * body.length).as("bytes held").isLessThanOrEqualTo(DEAD_LETTER_BYTES + body.length);
        }
        assertThat(refused).as("a publish past the bound refused").isTrue();
    }

    /** A user holds at most the shop's number of connections: one more is refused. */
    @Test
    void aUserCannotOpenMoreConnectionsThanItsLimit() throws Exception {
        List<Connection> open = new ArrayList<>();
        try {
            for (int opened = 0; opened < ShopBrokerUsers.MAX_CONNECTIONS; opened++) {
                open.add(connectAs("shipping"));
            }
            assertThatThrownBy(() -> connectAs("shipping").close())
                    .as("one connection more than the limit")
                    .hasStackTraceContaining(
                            "user connection limit (%d) is reached".formatted(ShopBrokerUsers.MAX_CONNECTIONS));
        } finally {
            for (Connection connection : open) {
                connection.close();
            }
        }
    }

    /**
     * A relay user may publish its own events' routing keys only; the {@code CC} and {@code BCC} headers name further
     * routing keys, which RabbitMQ before 4.0.3 did not check against the topic permission: a relay could reach every
     * queue bound to any event.
     */
    @Test
    void aRelayCannotReachOtherEventsQueuesThroughCcOrBccHeaders() throws Exception {
        String billing = queue("billing");
        rabbit.purge(billing);
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueBind(billing, EXCHANGE, "order.order.placed.v1");
        }
        try (Connection stockRelay = connectAs("stock-relay")) {
            for (String header : List.of("CC", "BCC")) {
                assertRefused(() -> {
                    try (Channel channel = stockRelay.createChannel()) {
                        channel.confirmSelect();
                        channel.basicPublish(
                                EXCHANGE,
                                ShopScenario.STOCK_RESERVED,
                                new AMQP.BasicProperties.Builder()
                                        .headers(Map.of(header, List.of("order.order.placed.v1")))
                                        .build(),
                                "{}".getBytes(UTF_8));
                        channel.waitForConfirmsOrDie(5_000);
                    }
                });
            }
        } finally {
            try (Connection admin = rabbit.newConnection();
                    Channel channel = admin.createChannel()) {
                channel.queueUnbind(billing, EXCHANGE, "order.order.placed.v1");
            }
        }
        assertThat(rabbit.messageCount(billing))
                .as("nothing reached billing's queue")
                .isZero();
    }

    @Test
    void theReplayUserCannotConsumeAServicesQueue() throws Exception {
        try (Connection replay = connectAs("replay")) {
            assertRefused(() -> replay.createChannel().basicGet(queue("stock"), false));
        }
    }

    /**
     * The replay user moves dead letters back to the services' queues, and may put nothing into any other queue of the
     * virtual host: not through the default exchange (which delivers to any queue by its name), nor through a
     * service's replay exchange (bound to that service's queue and dead-letter queue only).
     */
    @Test
    void theReplayUserCannotInjectIntoAnyOtherQueue() throws Exception {
        String other = rabbit.uniqueName("audit.forged");
        try (Connection admin = rabbit.newConnection();
                Channel channel = admin.createChannel()) {
            channel.queueDeclare(rabbit.deleteAtExit(other), false, false, false, Map.of());
        }
        try (Connection replay = connectAs("replay")) {
            attemptQuietly(() -> publish(replay, "", other));
            for (String service : List.of("stock", "shipping", "billing")) {
                attemptQuietly(() -> publish(replay, ShopBrokerUsers.replayExchange(queue(service)), other));
            }
            attemptQuietly(() -> publish(replay, "amq.direct", other));
            attemptQuietly(() -> publish(replay, "amq.topic", other));
        }
        assertThat(rabbit.messageCount(other))
                .as("messages the replay user put into a queue that is no service's")
                .isZero();
    }

    @ParameterizedTest
    @ValueSource(strings = {"stock", "shipping", "billing"})
    void eachServiceMayDoWhatItNeedsWithItsOwnQueues(String service) throws Exception {
        String queue = queue(service);
        rabbit.purge(queue);
        rabbit.purge(queue + ".dlq");
        try (Connection user = connectAs(service);
                Channel channel = user.createChannel()) {
            channel.queueDeclare(queue, true, false, false, Map.of("x-queue-type", "quorum"));
            channel.queueBind(queue, EXCHANGE, "order.order.placed.v1");
            channel.queueBind(queue + ".dlq", deadLetterExchange(service), queue);
            assertThat(channel.basicGet(queue, true)).isNull();
            channel.confirmSelect();
            channel.basicPublish(
                    deadLetterExchange(service), queue, new AMQP.BasicProperties(), "dead".getBytes(UTF_8));
            channel.waitForConfirmsOrDie(5_000);
            // The binding is this test's: the other tests count what reaches the queue without it.
            channel.queueUnbind(queue, EXCHANGE, "order.order.placed.v1");
            channel.queueUnbind(queue + ".dlq", deadLetterExchange(service), queue);
        }
        assertThat(rabbit.drain(queue + ".dlq")).hasSize(1);
    }

    @Test
    void theRelayPublishesEventsAndTheReplayCommandMovesDeadLettersAsTheReplayUser() throws Exception {
        rabbit.purge(queue("stock"));
        rabbit.purge(queue("stock") + ".dlq");
        try (Connection relay = connectAs("relay")) {
            publish(relay, EXCHANGE, "order.order.placed.v1");
        }
        try (Connection admin = rabbit.newConnection()) {
            publish(admin, "", queue("stock") + ".dlq");
            publish(admin, "", queue("stock") + ".dlq");
        }

        try (Connection replay = connectAs("replay")) {
            DeadLetterReplay command = new DeadLetterReplay(new PrintStream(new ByteArrayOutputStream(), true, UTF_8));
            assertThat(command.replay(replay, queue("stock"), Set.of(), true))
                    .isEqualTo(new DeadLetterReplay.Result(2, 0, 0, 0, 0, 0));
            assertThat(command.replay(replay, queue("stock"), Set.of(), false))
                    .isEqualTo(new DeadLetterReplay.Result(2, 0, 0, 0, 0, 0));
        }

        assertThat(rabbit.drain(queue("stock"))).hasSize(2);
        assertThat(rabbit.messageCount(queue("stock") + ".dlq")).isZero();
    }

    private static String deadLetterExchange(String service) {
        return ShopBrokerUsers.deadLetterExchange(queue(service));
    }

    private static String queue(String service) {
        return service + ".events" + SUFFIX;
    }

    private static Connection connectAs(String user) throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(rabbit.host());
        factory.setPort(rabbit.port());
        factory.setUsername(user + SUFFIX);
        factory.setPassword(user + SUFFIX);
        return factory.newConnection(user);
    }

    private static void publish(Connection connection, String exchange, String routingKey) throws Exception {
        try (Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            // An event id as message id: a dead letter without one is not replayed.
            channel.basicPublish(
                    exchange,
                    routingKey,
                    new AMQP.BasicProperties.Builder()
                            .messageId(UUID.randomUUID().toString())
                            .build(),
                    "{}".getBytes(UTF_8));
            channel.waitForConfirmsOrDie(5_000);
        }
    }

    private interface Attempt {
        void run() throws Exception;
    }

    /** Tries what may be refused; whether it is or not, what counts is what reached the queue after. */
    private static void attemptQuietly(Attempt attempt) {
        try {
            attempt.run();
        } catch (Exception ex) {
            // refused: the channel or the connection is closed by the broker
        }
    }

    private static void assertRefused(Attempt attempt) {
        assertThatThrownBy(attempt::run).as("the broker refuses it").hasStackTraceContaining("ACCESS_REFUSED");
    }
}
