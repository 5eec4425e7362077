package dev.exactlyonce.infra.shop;

import java.util.List;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * The shop's users on RabbitMQ, each allowed what it needs and nothing more (RabbitMQ's configure, write and read
 * permissions are regular expressions over resource names), password = user name, as the databases' roles:
 *
 * <ul>
 *   <li>one per consuming service: it configures (declares) its own queue and dead-letter queue, writes to them (to
 *       bind them) and to its own dead-letter exchange, {@code <queue>.dlx} (to dead-letter a message), reads its own
 *       queue and the exchanges its queues are bound to; on the {@code events} exchange, with the routing keys of the
 *       events its service handles only (a topic permission's read side, which RabbitMQ checks on a binding to a topic
 *       exchange): it cannot bind its queue with {@code #}, which would route it every event of every service, nor
 *       with a chain of {@code #} segments, which costs the broker millions of routing steps on every publish. Each
 *       service has a dead-letter exchange of its own: on a shared one, a service could publish into another's
 *       dead-letter queue (the routing key is the queue's name), or bind a queue of its own to it and take copies of
 *       another's dead letters. It declares no exchange: the
 *       exchanges are the broker's definitions, and the services check they exist ({@code declare-exchange: false},
 *       {@code declare-dlx: false}). It writes nothing else: with write on the {@code events} exchange, it could bind
 *       that exchange to its dead-letter exchange (or declare an exchange named like its queue with {@code events} as
 *       alternate exchange) and route any event there, past a topic permission;
 *   <li>one per emitting service's outbox relay ({@code stock-relay}): writes to the {@code events} exchange, with the
 *       routing keys of its service's own events only (a topic permission: it cannot publish an order's event), and
 *       nothing else; the service's relay publishes through a binder of its own, as this user;
 *   <li>{@code relay}, the order service's outbox relay: writes to the {@code events} exchange, with the order
 *       service's routing keys only, nothing else;
 *   <li>{@code replay}, the operator's dead-letter replay command: reads the dead-letter queues and writes to the
 *       services' replay exchanges ({@link #replayExchange}), each bound to one service's queue and dead-letter queue;
 *       not to the default exchange, which delivers to any queue of the virtual host by its name.
 * </ul>
 *
 * <p>Each user holds at most {@link #MAX_CONNECTIONS} connections and {@link #MAX_CHANNELS} channels open at once
 * (a service holds two or three connections per instance): one that opens more, by a bug or on purpose, is refused
 * them, rather than exhausting the broker's file descriptors and processes for every other user.
 *
 * <p>{@code infra/rabbitmq/definitions.json} declares the same users for the broker of {@code compose.yaml}, without a
 * password (none of them can log in there until one is set), and no administrator.
 */
public final class ShopBrokerUsers {

    /** The connections a user may hold open at once, across the instances of its service. */
    public static final int MAX_CONNECTIONS = 20;

    /** The channels a user may hold open at once, across its connections. */
    public static final int MAX_CHANNELS = 200;

    /**
     * The dead-letter exchange of a service's queue, {@code <queue>.dlx}: its dead letters go through it, to
     * {@code <queue>.dlq} (the services' {@code dead-letter-exchange}).
     */
    public static String deadLetterExchange(String queue) {
        return queue + ".dlx";
    }

    /**
     * The replay exchange of a service's queue, {@code <queue>.replay}: a direct exchange bound to the queue (routing
     * key {@code <queue>}) and to its dead-letter queue (routing key {@code <queue>.dlq}), and to nothing else. The
     * replay command moves dead letters back through it; the replay user writes to nothing else.
     */
    public static String replayExchange(String queue) {
        return queue + ".replay";
    }

    /**
     * A user and its permissions on the virtual host {@code /}.
     *
     * @param name the user name, and its password
     * @param configure the resources it may declare or delete
     * @param write the resources it may publish to, or bind queues of
     * @param read the resources it may consume from, or bind to
     */
    public record User(
            String name,
            String configure,
            String write,
            String read,
            @Nullable TopicPermission topic) {}

    /**
     * What a user may publish to a topic exchange, by routing key (RabbitMQ's topic authorisation).
     *
     * @param exchange the exchange
     * @param write the routing keys it may publish with
     * @param read the routing keys it may bind a queue or exchange of its own with
     */
    public record TopicPermission(String exchange, String write, String read) {}

    private ShopBrokerUsers() {}

    /** The users of the shop whose exchange and queues end with {@code suffix} ({@code ""} for the demo). */
    public static List<User> users(String suffix) {
        String exchange = quote("events" + suffix);
        Stream<User> services = ShopScenario.SERVICES.stream().flatMap(service -> {
            String queue = quote(service.queue(suffix));
            User consumer = new User(
                    service.database() + suffix,
                    "^%s(\\.dlq)?$".formatted(queue),
                    "^(%s(\\.dlq|\\.dlx)?)$".formatted(queue),
                    "^(%s(\\.dlx)?|%s)$".formatted(queue, exchange),
                    new TopicPermission("events" + suffix, "^$", routingKeys(service.events())));
            if (service.emits().isEmpty()) {
                return Stream.of(consumer);
            }
            // Its outbox relay publishes as a user of its own: the consumer's user, which may read its dead-letter
            // exchange, must not write to the events exchange (it could bind the one to the other and route any event
            // there, past its topic permission).
            User relay = new User(
                    relayOf(service, suffix),
                    "^$",
                    "^%s$".formatted(exchange),
                    "^$",
                    publishing("events" + suffix, service.emits()));
            return Stream.of(consumer, relay);
        });
        String deadLetterQueues = ShopScenario.SERVICES.stream()
                .map(service -> quote(service.queue(suffix)) + "\\.dlq")
                .reduce((a, b) -> a + "|" + b)
                .orElseThrow();
        String replayExchanges = ShopScenario.SERVICES.stream()
                .map(service -> quote(replayExchange(service.queue(suffix))))
                .reduce((a, b) -> a + "|" + b)
                .orElseThrow();
        return Stream.concat(
                        services,
                        Stream.of(
                                new User(
                                        "relay" + suffix,
                                        "^$",
                                        "^%s$".formatted(exchange),
                                        "^$",
                                        publishing(
                                                "events" + suffix,
                                                List.of(OrderService.PLACED, OrderService.STATUS_CHANGED))),
                                new User(
                                        "replay" + suffix,
                                        "^$",
                                        "^(%s)$".formatted(replayExchanges),
                                        "^(%s)$".formatted(deadLetterQueues),
                                        null)))
                .toList();
    }

    /** Publishing to the exchange with those routing keys only. */
    private static TopicPermission publishing(String exchange, List<String> routingKeys) {
        return new TopicPermission(exchange, routingKeys(routingKeys), ".*");
    }

    /** Those routing keys, and no other. */
    private static String routingKeys(List<String> routingKeys) {
        return "^(%s)$"
                .formatted(String.join(
                        "|", routingKeys.stream().map(ShopBrokerUsers::quote).toList()));
    }

    /** The user a service's outbox relay publishes as, such as {@code stock-relay} for {@code stock-service}. */
    public static String relayOf(ShopScenario.Service service, String suffix) {
        return service.database() + "-relay" + suffix;
    }

    /** The user of a service, such as {@code stock} for {@code stock-service}. */
    public static String userOf(ShopScenario.Service service, String suffix) {
        return service.database() + suffix;
    }

    /** A name as a regular expression that matches it alone: names hold letters, digits, dots and underscores. */
    static String quote(String name) {
        return name.replace(".", "\\.");
    }
}
