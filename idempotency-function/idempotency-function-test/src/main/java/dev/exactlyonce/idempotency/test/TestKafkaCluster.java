package dev.exactlyonce.idempotency.test;

import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * A three-broker Kafka whose brokers a test kills, starts, freezes or cuts off: {@code KAFKA_CLUSTER} gives the
 * brokers' addresses ({@code host:port,host:port,...}, broker 1 first; each broker's node id is its place in the list),
 * {@code KAFKA_CLUSTER_CONTROL} the command that acts on them ({@code infra/cluster.sh kafka}: {@code kill N},
 * {@code start N}, {@code freeze N}, {@code cut N}, {@code heal}). Tests that need it are enabled by
 * {@code KAFKA_CLUSTER}.
 */
public final class TestKafkaCluster {

    private final ClusterControl cluster = new ClusterControl("Kafka", "KAFKA_CLUSTER", "KAFKA_CLUSTER_CONTROL");

    private TestKafkaCluster() {}

    /** The cluster the environment names (see {@link ClusterControl}). */
    public static TestKafkaCluster fromEnvironment() {
        return new TestKafkaCluster();
    }

    /** Every broker's address, as Kafka's {@code bootstrap.servers} takes them. */
    public String brokers() {
        return this.cluster.addresses();
    }

    /** Makes the cluster the Kafka binder's, with every broker's address. */
    public void registerBinder(DynamicPropertyRegistry registry) {
        registry.add("spring.cloud.stream.kafka.binder.brokers", this::brokers);
    }

    /** Runs the cluster's control command with the arguments ({@code kill 2}, say); returns what it printed. */
    public String control(String... arguments) {
        return this.cluster.control(arguments);
    }
}
