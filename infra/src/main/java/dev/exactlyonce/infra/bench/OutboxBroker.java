package dev.exactlyonce.infra.bench;

import java.util.List;
import java.util.Map;

/**
 * The broker the outbox benchmark's relay publishes to, with what differs between RabbitMQ and Kafka: the
 * destinations (one that takes every event, one that refuses every event), the consumer that counts arrivals, and the
 * instances' settings.
 */
public sealed interface OutboxBroker extends AutoCloseable permits RabbitOutboxBroker, KafkaOutboxBroker {

    /** The broker {@code --broker} names ({@code rabbitmq}, the default, or {@code kafka}). */
    public static OutboxBroker named(String name, Map<String, String> env) {
        return switch (name) {
            case "rabbitmq" -> new RabbitOutboxBroker(env);
            case "kafka" -> KafkaOutboxBroker.fromEnvironment(env);
            default ->
                throw new IllegalArgumentException(
                        "Unknown broker '%s'; the outbox benchmark runs on rabbitmq or kafka".formatted(name));
        };
    }

    /** Where it is, and how it confirms, for the report. */
    String describe();

    /**
     * Makes the destination the events go to, and the refusing one, whose every publication the broker refuses;
     * starts counting what arrives at the first into {@code arrivals}.
     */
    void start(String destination, String refusing, Arrivals arrivals) throws Exception;

    /** The settings of an instance that publishes to them. */
    List<String> properties(String destination, String refusing);

    @Override
    void close() throws Exception;
}
