package dev.exactlyonce.infra.shop;

import dev.exactlyonce.idempotency.test.TestKafkaCluster;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The broker a run of the shop is on, RabbitMQ or Kafka, as {@link ShopScenario} uses it: what it sets up and tears
 * down, what it tells the services, how it counts what waits and what was dead-lettered, and its nodes' faults. One
 * object per run: {@link #prepare} names it.
 */
public sealed interface ShopBroker extends AutoCloseable permits RabbitShopBroker, KafkaShopBroker {

    /**
     * RabbitMQ: its nodes ({@code host:port}; the three of {@code cluster} on a cluster), as an administrator, since
     * the run creates the shop's broker users.
     */
    static ShopBroker rabbitMq(List<String> nodes, String user, String password, @Nullable TestRabbitCluster cluster) {
        return new RabbitShopBroker(nodes, user, password, cluster);
    }

    /** Kafka: its brokers ({@code host:port,...}; the three of {@code cluster} on a cluster). */
    static ShopBroker kafka(String brokers, @Nullable TestKafkaCluster cluster) {
        return new KafkaShopBroker(brokers, cluster);
    }

    /** Where it is, for the run's first lines. */
    String describe();

    /**
     * Starts the run {@code suffix} names: empties what an earlier run of that name left (queues or topics), makes what
     * the services may not make themselves; returns what it made, for the run's progress.
     */
    String prepare(String suffix) throws Exception;

    /** The properties that put a service on this broker: addresses, user, what it consumes, where it emits. */
    List<String> serviceProperties(ShopScenario.Service service);

    /** The properties that put the order service's relay on this broker. */
    List<String> orderServiceProperties();

    /** Where the order service writes an event of that name: RabbitMQ's exchange, Kafka's topic of the event. */
    String destination(String eventName);

    /**
     * Whether the services, started, are on the broker: their queues declared, or their consumers in their groups, with
     * partitions; not known yet counts as no.
     */
    boolean servicesReady();

    /** Once the services are ready: binds what only exists once they declared it (RabbitMQ's replay exchanges). */
    void servicesStarted() throws Exception;

    /** The messages waiting for the service: in its queue, or its group's lag on its topics. */
    int queued(ShopScenario.Service service) throws Exception;

    /** The service's dead letters: in its dead-letter queue or topic. */
    int deadLetters(ShopScenario.Service service) throws Exception;

    /**
     * Drops every broker connection of the services at once, so that the broker delivers again what it delivered and
     * was not acknowledged; false where it cannot (Kafka's clients reach each broker at the address it advertises, so
     * no proxy of the run sits between them): the run kills the services instead.
     */
    boolean dropConnections() throws InterruptedException;

    /** Whether it is a cluster of {@code infra/cluster.sh}, whose nodes the run may kill and cut off. */
    boolean cluster();

    /**
     * The node (1 to 3) leading what the service consumes: its quorum queue, or the first partition of its first
     * topic; with what that is, for the run's progress.
     */
    Leader leaderOf(ShopScenario.Service service) throws Exception;

    /** What a node is called: "RabbitMQ node", "Kafka broker". */
    String nodeName();

    /** Runs {@code infra/cluster.sh}'s command on the cluster ({@code kill 2}, say). */
    void control(String... arguments);

    /** The names the run made on the broker, to delete after a test. */
    List<String> names();

    /** Deletes what the run made on the broker that outlives its names (users and policies). */
    void dropUsers();

    @Override
    void close();

    /** A node, and what it leads. */
    record Leader(int node, String of) {}
}
