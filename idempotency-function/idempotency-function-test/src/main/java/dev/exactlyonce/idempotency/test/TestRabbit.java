package dev.exactlyonce.idempotency.test;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * The RabbitMQ broker of a test run, and names of exchanges and queues unique to the run.
 *
 * <p>The broker is, in this order: the one the environment names ({@code RABBITMQ_HOST}, {@code RABBITMQ_PORT},
 * {@code RABBITMQ_USERNAME}, {@code RABBITMQ_PASSWORD}, and {@code RABBITMQCTL}, the command that runs
 * {@code rabbitmqctl} on it, such as {@code infra/rabbitmq4.sh ctl}); a Testcontainers container when a Docker engine
 * is available; {@code 127.0.0.1:5672} as {@code guest}. Names made by {@link #uniqueName(String)} end with the run's
 * id; the exchanges and queues of those names (and their {@code .dlq} queues), and of the names given to
 * {@link #deleteAtExit(String)}, are deleted when the JVM exits, so that runs leave nothing on a shared broker.
 */
public final class TestRabbit {

    private static final Logger logger = LoggerFactory.getLogger(TestRabbit.class);

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    private static @Nullable TestRabbit instance;

    private final String host;

    private final int port;

    private final String username;

    private final String password;

    private final String runId = Integer.toHexString(ThreadLocalRandom.current().nextInt(0x100000, 0x1000000));

    private final Set<String> names = ConcurrentHashMap.newKeySet();

    /** How {@link #control} runs {@code rabbitmqctl} on this broker, when the tests can. */
    private final @Nullable Control control;

    private TestRabbit(String host, int port, String username, String password, @Nullable Control control) {
        this.host = host;
        this.port = port;
        this.username = username;
        this.password = password;
        this.control = control;
    }

    /** The broker of this test run, found (or started) at the first call. */
    public static synchronized TestRabbit broker() {
        if (instance == null) {
            instance = locate();
            Runtime.getRuntime().addShutdownHook(new Thread(instance::deleteNamed, "delete-test-queues"));
        }
        return instance;
    }

    public String host() {
        return this.host;
    }

    public int port() {
        return this.port;
    }

    /** The user the tests connect as: the broker's administrator. */
    public String username() {
        return this.username;
    }

    public String password() {
        return this.password;
    }

    /** {@code base} followed by the run's id, for example {@code events.3fa9c1}; deleted when the JVM exits. */
    public String uniqueName(String base) {
        String name = base + "." + this.runId;
        this.names.add(name);
        return name;
    }

    /**
     * A topic exchange named {@code base} followed by the run's id, declared now: for services that declare no exchange
     * ({@code declare-exchange: false}), as the broker's definitions would (a service that declares no dead-letter
     * exchange either needs {@link #directExchange} too). Deleted when the JVM exits.
     */
    public String topicExchange(String base) {
        String name = uniqueName(base);
        withChannel(channel -> channel.exchangeDeclare(name, "topic", true));
        return name;
    }

    /**
     * A direct exchange of that name, declared now, as the broker's definitions would: a service's own dead-letter
     * exchange, for example, when the service declares none ({@code declare-dlx: false}). Deleted when the JVM exits.
     */
    public String directExchange(String name) {
        this.names.add(name);
        withChannel(channel -> channel.exchangeDeclare(name, "direct", true));
        return name;
    }

    /**
     * Deletes, when the JVM exits, the queue of that name and its {@code .dlq} queue, or the exchange of that name:
     * for the names a binder or a scenario makes of the run's unique names (the Rabbit binder's
     * {@code <destination>.<group>}, for example). Returns the name.
     */
    public String deleteAtExit(String name) {
        this.names.add(name);
        return name;
    }

    /** Makes this broker the service's {@code spring.rabbitmq}. */
    public void registerConnection(DynamicPropertyRegistry registry) {
        registry.add("spring.rabbitmq.host", this::host);
        registry.add("spring.rabbitmq.port", this::port);
        registry.add("spring.rabbitmq.username", () -> this.username);
        registry.add("spring.rabbitmq.password", () -> this.password);
    }

    /** A new connection to the broker, for tests that publish or inspect queues themselves. */
    public Connection newConnection() {
        try {
            return connectionFactory().newConnection("test");
        } catch (IOException | TimeoutException ex) {
            throw new IllegalStateException("Could not connect to RabbitMQ at " + this.host + ":" + this.port, ex);
        }
    }

    /**
     * Publishes an event as the order service's relay does: JSON, persistent, {@code message_id} = the event id,
     * routing key = the event name; returns once the broker confirmed it.
     */
    public void publish(String exchange, EventEnvelope<?> event) {
        publish(
                exchange,
                event.eventName(),
                CODEC.encode(event),
                event.eventId().toString());
    }

    /** Publishes a message body as it is (for bodies that are not valid envelopes), once the broker confirmed it. */
    public void publish(String exchange, String routingKey, byte[] body, @Nullable String messageId) {
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .messageId(messageId)
                .deliveryMode(2)
                .build();
        withChannel(channel -> {
            channel.confirmSelect();
            channel.basicPublish(exchange, routingKey, properties, body);
            channel.waitForConfirmsOrDie(10_000);
            return null;
        });
    }

    /**
     * Runs {@code rabbitmqctl} on the broker (a permission set or cleared, say): in the container, on this machine for
     * the local broker, or as {@code RABBITMQCTL} names it for a broker the environment names.
     *
     * @return what it printed
     * @throws IllegalStateException when it fails, or when the environment names the broker but no {@code RABBITMQCTL}
     */
    public String control(String... arguments) {
        if (this.control == null) {
            throw new IllegalStateException("rabbitmqctl cannot reach the broker at " + this.host + ":" + this.port
                    + ", named by RABBITMQ_HOST: name the command that runs rabbitmqctl on it with RABBITMQCTL"
                    + " (infra/rabbitmq4.sh env prints it for the node that script runs)");
        }
        try {
            return this.control.run(List.of(arguments));
        } catch (IOException ex) {
            throw new IllegalStateException("rabbitmqctl " + String.join(" ", arguments) + ": " + ex.getMessage(), ex);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running rabbitmqctl", ex);
        }
    }

    /** Runs {@code rabbitmqctl} with the arguments; returns what it printed, or fails with it. */
    private interface Control {
        String run(List<String> arguments) throws IOException, InterruptedException;
    }

    /** {@code rabbitmqctl} with the arguments. */
    private static String[] rabbitmqctl(List<String> arguments) {
        return command(List.of("rabbitmqctl"), arguments);
    }

    private static String[] command(List<String> command, List<String> arguments) {
        List<String> line = new ArrayList<>(command);
        line.addAll(arguments);
        return line.toArray(String[]::new);
    }

    /** Runs {@code rabbitmqctl} on this machine, as that command line (its words) runs it. */
    private static Control commandControl(List<String> rabbitmqctl) {
        return arguments -> {
            Process process = new ProcessBuilder(command(rabbitmqctl, arguments))
                    .redirectErrorStream(true)
                    .start();
            String output =
                    new String(process.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            if (process.waitFor() != 0) {
                throw new IOException("exit code " + process.exitValue() + ": " + output.strip());
            }
            return output;
        };
    }

    /** How many messages are ready in the queue. */
    public int messageCount(String queue) {
        return withChannel(channel -> channel.queueDeclarePassive(queue).getMessageCount());
    }

    /** Deletes every ready message of the queue; returns how many there were. */
    public int purge(String queue) {
        return withChannel(channel -> channel.queuePurge(queue).getMessageCount());
    }

    /** Takes every ready message out of the queue. */
    public List<GetResponse> drain(String queue) {
        return withChannel(channel -> {
            List<GetResponse> messages = new ArrayList<>();
            for (GetResponse response = channel.basicGet(queue, true);
                    response != null;
                    response = channel.basicGet(queue, true)) {
                messages.add(response);
            }
            return messages;
        });
    }

    private <T> T withChannel(ChannelCallback<T> callback) {
        try (Connection connection = newConnection();
                Channel channel = connection.createChannel()) {
            return callback.doWith(channel);
        } catch (IOException | TimeoutException | InterruptedException ex) {
            if (ex instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            throw new IllegalStateException("RabbitMQ at " + this.host + ":" + this.port + ": " + ex, ex);
        }
    }

    private interface ChannelCallback<T> {
        T doWith(Channel channel) throws IOException, TimeoutException, InterruptedException;
    }

    private ConnectionFactory connectionFactory() {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(this.host);
        factory.setPort(this.port);
        factory.setUsername(this.username);
        factory.setPassword(this.password);
        return factory;
    }

    private void deleteNamed() {
        try (Connection connection = newConnection()) {
            for (String name : this.names) {
                for (String queue : new String[] {name, name + ".dlq"}) {
                    try (Channel channel = connection.createChannel()) {
                        channel.queueDelete(queue);
                    } catch (IOException | TimeoutException | RuntimeException ex) {
                        logger.debug("Could not delete queue {}: {}", queue, ex.getMessage());
                    }
                }
                try (Channel channel = connection.createChannel()) {
                    channel.exchangeDelete(name);
                } catch (IOException | TimeoutException | RuntimeException ex) {
                    logger.debug("Could not delete exchange {}: {}", name, ex.getMessage());
                }
            }
        } catch (IOException | RuntimeException ex) {
            logger.warn("Could not delete the test run's queues: {}", ex.getMessage());
        }
    }

    private static TestRabbit locate() {
        Map<String, String> env = System.getenv();
        if (env.containsKey("RABBITMQ_HOST")) {
            return checked(new TestRabbit(
                    env.get("RABBITMQ_HOST"),
                    Integer.parseInt(env.getOrDefault("RABBITMQ_PORT", "5672")),
                    env.getOrDefault("RABBITMQ_USERNAME", "guest"),
                    env.getOrDefault("RABBITMQ_PASSWORD", "guest"),
                    env.containsKey("RABBITMQCTL")
                            ? commandControl(
                                    List.of(env.get("RABBITMQCTL").trim().split("\\s+")))
                            : null));
        }
        if (TestPostgres.DockerEngine.isAvailable()) {
            return Containers.rabbit();
        }
        return checked(new TestRabbit("127.0.0.1", 5672, "guest", "guest", commandControl(List.of("rabbitmqctl"))));
    }

    private static TestRabbit checked(TestRabbit broker) {
        try (Connection connection = broker.connectionFactory().newConnection("test-probe")) {
            logger.info("Tests use RabbitMQ at {}:{}", broker.host, broker.port);
            return broker;
        } catch (IOException | TimeoutException ex) {
            throw new IllegalStateException(
                    ("No RabbitMQ for the tests: %s:%d does not accept connections (%s). Either start a Docker"
                                    + " engine, so that Testcontainers starts one, or run RabbitMQ and name it with"
                                    + " RABBITMQ_HOST, RABBITMQ_PORT, RABBITMQ_USERNAME and RABBITMQ_PASSWORD"
                                    + " (default 127.0.0.1, 5672, guest, guest).")
                            .formatted(broker.host, broker.port, ex.getMessage()),
                    ex);
        }
    }

    /** Testcontainers, loaded only when a Docker engine is there. */
    private static final class Containers {

        static TestRabbit rabbit() {
            org.testcontainers.rabbitmq.RabbitMQContainer container =
                    new org.testcontainers.rabbitmq.RabbitMQContainer("rabbitmq:4-management-alpine");
            container.start();
            logger.info("Tests use RabbitMQ in container {}", container.getContainerId());
            return new TestRabbit(
                    container.getHost(),
                    container.getAmqpPort(),
                    container.getAdminUsername(),
                    container.getAdminPassword(),
                    arguments -> {
                        org.testcontainers.containers.Container.ExecResult result =
                                container.execInContainer(rabbitmqctl(arguments));
                        if (result.getExitCode() != 0) {
                            throw new IOException("exit code " + result.getExitCode() + ": " + result.getStderr());
                        }
                        return result.getStdout();
                    });
        }
    }
}
