package dev.exactlyonce.idempotency.test;

import com.rabbitmq.client.Address;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import java.io.IOException;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * A RabbitMQ cluster whose nodes a test kills, starts, freezes or cuts off: {@code RABBITMQ_CLUSTER} gives the nodes'
 * addresses ({@code host:port,host:port,...}, node 1 first), {@code RABBITMQ_CLUSTER_CONTROL} the command that acts on
 * them ({@code infra/cluster.sh rabbitmq}: {@code kill N}, {@code start N}, {@code freeze N}, {@code cut N},
 * {@code heal}, {@code ctl N ...}). Tests that need it are enabled by {@code RABBITMQ_CLUSTER}.
 */
public final class TestRabbitCluster {

    private final ClusterControl cluster =
            new ClusterControl("RabbitMQ", "RABBITMQ_CLUSTER", "RABBITMQ_CLUSTER_CONTROL");

    private TestRabbitCluster() {}

    /** The cluster the environment names (see {@link ClusterControl}). */
    public static TestRabbitCluster fromEnvironment() {
        return new TestRabbitCluster();
    }

    /** Every node's address, as {@code spring.rabbitmq.addresses} takes them. */
    public String addresses() {
        return this.cluster.addresses();
    }

    /**
     * Makes the cluster the service's {@code spring.rabbitmq}, as {@code guest}, with every node's address, and
     * heartbeats every 10 s: a node cut off from the service closes nothing the service sees, and it is the missed
     * heartbeats that tell the client to go to another node (after two minutes at the default of 60 s).
     */
    public void registerConnection(DynamicPropertyRegistry registry) {
        registry.add("spring.rabbitmq.addresses", this::addresses);
        registry.add("spring.rabbitmq.requested-heartbeat", () -> "10s");
        registry.add("spring.rabbitmq.username", () -> "guest");
        registry.add("spring.rabbitmq.password", () -> "guest");
    }

    /** A new connection to a node that answers, for tests that publish or inspect queues themselves. */
    public Connection newConnection() throws IOException, TimeoutException {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUsername("guest");
        factory.setPassword("guest");
        factory.setAutomaticRecoveryEnabled(false);
        factory.setConnectionTimeout(5_000);
        // A node cut off answers nothing: neither a heartbeat nor the reply to opening a channel.
        factory.setRequestedHeartbeat(5);
        factory.setChannelRpcTimeout(10_000);
        return factory.newConnection(Address.parseAddresses(addresses()));
    }

    /**
     * The node (1, 2 or 3) whose member leads the quorum queue, as node {@code askedNode} lists the queues.
     *
     * @throws IllegalStateException when the listing names no leader of it
     */
    public int leaderOf(String queue, int askedNode) {
        String leaders = control(
                "ctl", Integer.toString(askedNode), "-q", "list_queues", "name", "leader", "--no-table-headers");
        Matcher leader = Pattern.compile("(?m)^" + Pattern.quote(queue) + "\\s+rabbit@rmq(\\d)")
                .matcher(leaders);
        if (!leader.find()) {
            throw new IllegalStateException("No leader of %s in %s".formatted(queue, leaders));
        }
        return Integer.parseInt(leader.group(1));
    }

    /** Runs the cluster's control command with the arguments ({@code kill 2}, say); returns what it printed. */
    public String control(String... arguments) {
        return this.cluster.control(arguments);
    }
}
