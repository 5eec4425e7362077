package dev.exactlyonce.infra.shop;

import java.util.List;
import java.util.Map;

/**
 * The shop's RabbitMQ policies: limits the broker holds each queue to, whichever user declared it. A policy, not a
 * queue argument: the services declare their queues, and a policy changes without declaring them again.
 *
 * <ul>
 *   <li>a service's queue: a delivery limit of 20 (RabbitMQ 4's default for a quorum queue, said here so that it does
 *       not depend on the broker's version), so that a message no consumer can take (one whose headers the client
 *       cannot read closes the connection each time it is delivered) goes to the dead-letter queue after that many
 *       returns, and the messages behind it are delivered;
 *   <li>a service's dead-letter queue: at most {@link #DEAD_LETTER_BYTES} of messages, and a message published past it
 *       refused ({@code reject-publish}), so that a service publishing to its own dead-letter exchange cannot fill the
 *       disk until the alarm blocks every publisher of the broker. The broker's own dead-lettering is not held by it: a
 *       message the service rejects still reaches the queue, so no dead letter is lost (and a flood of messages a
 *       service rejects is held by the disk alarm alone). No delivery limit: a dead-letter queue, having no
 *       dead-letter exchange of its own, drops a message past it.
 * </ul>
 *
 * <p>{@code infra/rabbitmq/definitions.json} declares the same policies for the broker of {@code compose.yaml}.
 */
public final class ShopBrokerPolicies {

    /** The most a service's dead-letter queue holds: 256 MiB. */
    public static final long DEAD_LETTER_BYTES = 256L << 20;

    /** The returns of a delivery to a service's queue after which the broker dead-letters it. */
    public static final int DELIVERY_LIMIT = 20;

    /**
     * A policy of the virtual host {@code /}.
     *
     * @param name its name
     * @param pattern the names of the queues it applies to
     * @param definition the queue limits it sets
     */
    public record Policy(String name, String pattern, Map<String, Object> definition) {}

    private ShopBrokerPolicies() {}

    /** The shop's policies for the queues whose names end with {@code suffix} ({@code ""} for the demo). */
    public static List<Policy> policies(String suffix) {
        return policies(suffix, DEAD_LETTER_BYTES);
    }

    /** The same, with dead-letter queues holding at most {@code deadLetterBytes} (tests fill them). */
    public static List<Policy> policies(String suffix, long deadLetterBytes) {
        String queues = ShopScenario.SERVICES.stream()
                .map(service -> ShopBrokerUsers.quote(service.queue(suffix)))
                .reduce((a, b) -> a + "|" + b)
                .orElseThrow();
        return List.of(
                new Policy(
                        "service-queues" + suffix,
                        "^(%s)$".formatted(queues),
                        Map.of("delivery-limit", DELIVERY_LIMIT)),
                new Policy(
                        "dead-letter-queues" + suffix,
                        "^(%s)\\.dlq$".formatted(queues),
                        Map.of(
                                "max-length-bytes",
                                deadLetterBytes,
                                "overflow",
                                "reject-publish",
                                "delivery-limit",
                                -1)));
    }
}
