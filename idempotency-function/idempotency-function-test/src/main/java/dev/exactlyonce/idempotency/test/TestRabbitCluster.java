package dev.exactlyonce.idempotency.test;

import com.rabbitmq.client.Address;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * A RabbitMQ cluster whose nodes a test kills, starts, freezes or cuts off: {@code RABBITMQ_CLUSTER} gives the nodes'
 * addresses ({@code host:port,host:port,...}, node 1 first), {@code RABBITMQ_CLUSTER_CONTROL} the command that acts on
 * them ({@code infra/cluster.sh rabbitmq}: {@code kill N}, {@code start N}, {@code freeze N}, {@code cut N},
 * {@code heal}, {@code ctl N ...}). Tests that need it are enabled by {@code RABBITMQ_CLUSTER}.
 */
public final class TestRabbitCluster {

    private final @Nullable String addresses;

    private final @Nullable String control;

    private TestRabbitCluster(@Nullable String addresses, @Nullable String control) {
        this.addresses = addresses;
        this.control = control;
    }

    /**
     * The cluster the environment names. Reading it fails nothing (a test class holds it in a static field, and is
     * skipped where the environment names no cluster); using it fails, saying what to set, when the environment
     * names none.
     */
    public static TestRabbitCluster fromEnvironment() {
        return new TestRabbitCluster(System.getenv("RABBITMQ_CLUSTER"), System.getenv("RABBITMQ_CLUSTER_CONTROL"));
    }

    private static String required(@Nullable String value) {
        if (value == null || value.isBlank()) {
            throw new IllegalStateException("No RabbitMQ cluster: start one (infra/cluster.sh rabbitmq up, as root) and"
                    + " set RABBITMQ_CLUSTER (infra/cluster.sh rabbitmq addresses) and RABBITMQ_CLUSTER_CONTROL"
                    + " (infra/cluster.sh rabbitmq)");
        }
        return value;
    }

    /** Every node's address, as {@code spring.rabbitmq.addresses} takes them. */
    public String addresses() {
        return required(this.addresses);
    }

    /** Makes the cluster the service's {@code spring.rabbitmq}, as {@code guest}, with every node's address. */
    public void registerConnection(DynamicPropertyRegistry registry) {
        registry.add("spring.rabbitmq.addresses", this::addresses);
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
        return factory.newConnection(Address.parseAddresses(addresses()));
    }

    /** Runs the cluster's control command with the arguments ({@code kill 2}, say); returns what it printed. */
    public String control(String... arguments) {
        List<String> command =
                new ArrayList<>(List.of(required(this.control).trim().split("\\s+")));
        command.addAll(List.of(arguments));
        try {
            Process process =
                    new ProcessBuilder(command).redirectErrorStream(true).start();
            String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (process.waitFor() != 0) {
                throw new IllegalStateException(String.join(" ", command) + ": " + output.strip());
            }
            return output;
        } catch (IOException ex) {
            throw new IllegalStateException(String.join(" ", command) + ": " + ex.getMessage(), ex);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + String.join(" ", command), ex);
        }
    }
}
