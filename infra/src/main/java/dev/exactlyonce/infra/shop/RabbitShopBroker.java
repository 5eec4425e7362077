package dev.exactlyonce.infra.shop;

import com.rabbitmq.client.Address;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.ShutdownSignalException;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * The shop on RabbitMQ: one topic exchange of the run, which the order service's relay and stock-service's publish to
 * (routing key: the event name), a quorum queue per service with its dead-letter queue, and a broker user per service
 * and per relay, each allowed what it needs ({@link ShopBrokerUsers}). The services reach each node through a TCP
 * proxy of the run, which drops every connection at once.
 */
final class RabbitShopBroker implements ShopBroker {

    private final List<String> nodes;

    private final String user;

    private final String password;

    private final @Nullable TestRabbitCluster cluster;

    private final BrokerAdministration administration;

    /** Between the services and each node, to drop their connections. */
    private final List<TcpProxy> links = new ArrayList<>();

    private String suffix = "";

    private String exchange = "events";

    private List<ShopBrokerUsers.User> users = List.of();

    /** Setting up and watching the broker, as its administrator. */
    private @Nullable Connection admin;

    RabbitShopBroker(List<String> nodes, String user, String password, @Nullable TestRabbitCluster cluster) {
        this.nodes = List.copyOf(nodes);
        this.user = user;
        this.password = password;
        this.cluster = cluster;
        String first = nodes.get(0);
        this.administration = BrokerAdministration.of(first.substring(0, first.lastIndexOf(':')), user, password);
    }

    @Override
    public String describe() {
        return (cluster() ? "RabbitMQ cluster " : "RabbitMQ ") + String.join(",", this.nodes);
    }

    @Override
    public String prepare(String suffix) throws Exception {
        this.suffix = suffix;
        this.exchange = "events" + suffix;
        this.users = ShopBrokerUsers.users(suffix);
        this.admin = connect();
        resetTopology();
        this.users.forEach(this.administration::createUser);
        ShopBrokerPolicies.policies(suffix).forEach(this.administration::createPolicy);
        for (Address node : Address.parseAddresses(String.join(",", this.nodes))) {
            this.links.add(TcpProxy.to(node.getHost(), node.getPort()));
        }
        return ("broker users %s, each allowed what it needs (a service its own queues, the relay the events exchange,"
                        + " the replay command the dead-letter queues); the services reach RabbitMQ through %s on %s")
                .formatted(
                        String.join(
                                ", ",
                                this.users.stream()
                                        .map(ShopBrokerUsers.User::name)
                                        .toList()),
                        cluster() ? "a proxy per node" : "a proxy",
                        addresses());
    }

    @Override
    public List<String> serviceProperties(ShopScenario.Service service) {
        String binding = "spring.cloud.stream.bindings." + service.binding() + ".";
        String name = ShopBrokerUsers.userOf(service, this.suffix);
        List<String> properties = new ArrayList<>(List.of(
                // The outbox relay publishes to the run's exchange, which the service's user may not declare.
                "idempotency.outbox.destination=" + this.exchange,
                "spring.cloud.stream.rabbit.bindings[" + this.exchange + "].producer.declare-exchange=false",
                "spring.rabbitmq.addresses=" + addresses(),
                "spring.rabbitmq.requested-heartbeat=10s",
                "spring.rabbitmq.username=" + name,
                "spring.rabbitmq.password=" + name,
                binding + "destination=" + this.exchange,
                binding + "group=" + service.queue(this.suffix)));
        if (!service.emits().isEmpty()) {
            // The relay publishes through the binder of its own that the service's application.yml gives it, as its
            // own user: the consumer's user may not write to the exchange (ShopBrokerUsers).
            String relay = ShopBrokerUsers.relayOf(service, this.suffix);
            properties.addAll(List.of(
                    "shop.relay.username=" + relay,
                    "shop.relay.password=" + relay,
                    "spring.cloud.stream.bindings." + this.exchange + ".binder=relay"));
        }
        return properties;
    }

    @Override
    public List<String> orderServiceProperties() {
        String relay = "relay" + this.suffix;
        return List.of(
                "spring.cloud.stream.default-binder=rabbit",
                "spring.rabbitmq.addresses=" + String.join(",", this.nodes),
                // A node cut off closes nothing the client sees: missed heartbeats tell it (60 s by default).
                "spring.rabbitmq.requested-heartbeat=10s",
                "spring.rabbitmq.username=" + relay,
                "spring.rabbitmq.password=" + relay,
                "idempotency.outbox.destination=" + this.exchange,
                "spring.cloud.stream.rabbit.bindings[" + this.exchange + "].producer.declare-exchange=false");
    }

    @Override
    public String destination(String eventName) {
        return this.exchange;
    }

    @Override
    public boolean servicesReady() {
        return ShopScenario.SERVICES.stream()
                .map(service -> service.queue(this.suffix))
                .allMatch(queue -> queueExists(queue) && queueExists(queue + ".dlq"));
    }

    /** Binds each service's replay exchange to its queue and dead-letter queue, as the broker's definitions do. */
    @Override
    public void servicesStarted() throws Exception {
        for (ShopScenario.Service service : ShopScenario.SERVICES) {
            String queue = service.queue(this.suffix);
            try (Channel channel = admin().createChannel()) {
                channel.queueBind(queue, ShopBrokerUsers.replayExchange(queue), queue);
                channel.queueBind(queue + ".dlq", ShopBrokerUsers.replayExchange(queue), queue + ".dlq");
            }
        }
    }

    @Override
    public int queued(ShopScenario.Service service) throws IOException {
        return messageCount(service.queue(this.suffix));
    }

    @Override
    public int deadLetters(ShopScenario.Service service) throws IOException {
        return messageCount(service.queue(this.suffix) + ".dlq");
    }

    @Override
    public boolean dropConnections() throws InterruptedException {
        this.links.forEach(TcpProxy::cut);
        // Long enough for the broker to see the connections gone and requeue what they had not acknowledged.
        Thread.sleep(500);
        this.links.forEach(TcpProxy::restore);
        return true;
    }

    @Override
    public boolean cluster() {
        return this.cluster != null;
    }

    @Override
    public Leader leaderOf(ShopScenario.Service service) {
        String queue = service.queue(this.suffix);
        return new Leader(cluster("find a queue's leader").leaderOf(queue, 1), queue);
    }

    @Override
    public String nodeName() {
        return "RabbitMQ node";
    }

    @Override
    public void control(String... arguments) {
        cluster("act on its nodes").control(arguments);
    }

    /**
     * The names of the run on the broker: its exchange, the services' queues (each with its {@code .dlq}) and their
     * dead-letter and replay exchanges.
     */
    @Override
    public List<String> names() {
        List<String> names = new ArrayList<>(List.of(this.exchange));
        ShopScenario.SERVICES.forEach(service -> {
            names.add(service.queue(this.suffix));
            names.add(ShopBrokerUsers.deadLetterExchange(service.queue(this.suffix)));
            names.add(ShopBrokerUsers.replayExchange(service.queue(this.suffix)));
        });
        return names;
    }

    @Override
    public void dropUsers() {
        this.users.forEach(one -> this.administration.deleteUser(one.name()));
        ShopBrokerPolicies.policies(this.suffix).forEach(policy -> this.administration.deletePolicy(policy.name()));
    }

    @Override
    public void close() {
        this.links.forEach(TcpProxy::close);
        try {
            if (this.admin != null && this.admin.isOpen()) {
                this.admin.close();
            }
        } catch (IOException | RuntimeException ex) {
            // closing anyway
        }
    }

    /**
     * Deletes the services' queues, and declares the exchanges, which the services do not declare (their users may not
     * configure them), as the broker's definitions do.
     */
    private void resetTopology() throws IOException, TimeoutException {
        try (Channel channel = admin().createChannel()) {
            channel.exchangeDeclare(this.exchange, "topic", true);
            for (ShopScenario.Service service : ShopScenario.SERVICES) {
                String queue = service.queue(this.suffix);
                channel.exchangeDeclare(ShopBrokerUsers.deadLetterExchange(queue), "direct", true);
                channel.exchangeDeclare(ShopBrokerUsers.replayExchange(queue), "direct", true);
            }
        }
        for (ShopScenario.Service service : ShopScenario.SERVICES) {
            String queue = service.queue(this.suffix);
            try (Channel channel = admin().createChannel()) {
                channel.queueDelete(queue);
                channel.queueDelete(queue + ".dlq");
            }
        }
    }

    private boolean queueExists(String queue) {
        try (Channel channel = admin().createChannel()) {
            channel.queueDeclarePassive(queue);
            return true;
        } catch (IOException | TimeoutException | ShutdownSignalException ex) {
            // 404: not declared yet (the channel is closed by the broker, and closing it again says so)
            return false;
        }
    }

    /**
     * The messages of the queue, ready or not; on a cluster, asked again (up to a minute) while the node the
     * administration connection reached is lost and it reconnects to another.
     */
    private int messageCount(String queue) throws IOException {
        long deadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
        while (true) {
            try (Channel channel = admin().createChannel()) {
                return channel.queueDeclarePassive(queue).getMessageCount();
            } catch (IOException | TimeoutException | ShutdownSignalException ex) {
                if (!cluster() || System.nanoTime() > deadline) {
                    throw ex instanceof IOException io ? io : new IOException(ex);
                }
                LockSupport.parkNanos(Duration.ofMillis(500).toNanos());
            }
        }
    }

    private Connection admin() {
        if (this.admin == null) {
            throw new IllegalStateException("The broker is not prepared for a run yet");
        }
        return this.admin;
    }

    private Connection connect() throws IOException, TimeoutException {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUsername(this.user);
        factory.setPassword(this.password);
        factory.setRequestedHeartbeat(10);
        factory.setChannelRpcTimeout(10_000);
        // On a cluster, it reconnects to another node when its own goes; what it declared is the broker's, durable.
        factory.setNetworkRecoveryInterval(1_000);
        factory.setTopologyRecoveryEnabled(false);
        return factory.newConnection(Address.parseAddresses(String.join(",", this.nodes)), "shop-administration");
    }

    private TestRabbitCluster cluster(String why) {
        if (this.cluster == null) {
            throw new IllegalStateException("A single RabbitMQ node has no cluster to " + why);
        }
        return this.cluster;
    }

    /** The services' addresses of the broker's nodes: the proxies'. */
    private String addresses() {
        return String.join(
                ",", this.links.stream().map(link -> "127.0.0.1:" + link.port()).toList());
    }
}
