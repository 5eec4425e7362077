package dev.exactlyonce.console;

import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The console's settings.
 *
 * @param services the services it watches, each with the management URL of each of its instances
 * @param users who may sign in, and what each may do
 * @param broker RabbitMQ's management API, where the dead-letter queues are read (none: the dead letters are not shown)
 * @param auditLog the file every action is appended to, one line each (kept across restarts)
 * @param timeout how long a service's endpoint is waited for before the page shows it unreachable
 */
@ConfigurationProperties("console")
public record ConsoleProperties(
        List<Service> services,
        List<User> users,
        @Nullable Broker broker,
        @DefaultValue("console-audit.log") Path auditLog,
        @DefaultValue("3s") Duration timeout) {

    public ConsoleProperties {
        if (services == null || services.isEmpty()) {
            throw new IllegalArgumentException("console.services names no service: give each service's name and the"
                    + " management URL of its instances (console.services[0].name, console.services[0].instances[0])");
        }
        if (users == null || users.isEmpty()) {
            throw new IllegalArgumentException("console.users names nobody who may sign in: give each user's name,"
                    + " password (with its encoding, such as {bcrypt}...) and role, viewer or operator");
        }
        services = List.copyOf(services);
        users = List.copyOf(users);
    }

    /**
     * RabbitMQ, as its operator: its management API, where the dead-letter queues are read, and AMQP, through which
     * they are replayed (the user writes to the queues' replay exchanges) and discarded.
     *
     * @param managementUrl such as {@code http://127.0.0.1:15672}
     * @param username the user
     * @param password its password
     * @param virtualHost the virtual host of the services' queues
     * @param addresses AMQP's {@code host:port} of each node, comma-separated; by default the management URL's host, on
     *     port 5672
     */
    public record Broker(
            URI managementUrl,
            String username,
            String password,
            @DefaultValue("/") String virtualHost,
            @Nullable String addresses) {

        /** The AMQP addresses, as given or by default. */
        public String amqpAddresses() {
            return this.addresses != null && !this.addresses.isBlank()
                    ? this.addresses
                    : this.managementUrl.getHost() + ":5672";
        }
    }

    /**
     * A service.
     *
     * @param name its name, as operators know it
     * @param instances the management URL of each instance, such as {@code http://127.0.0.1:9081}
     * @param queues the queues its guarded bindings consume, such as {@code billing.events}: a replay of a dead letter
     *     of one is checked against this service's records only (none named: against every service's)
     */
    public record Service(String name, List<URI> instances, List<String> queues) {

        public Service {
            queues = queues != null ? List.copyOf(queues) : List.of();
        }
    }

    /**
     * Someone who may sign in.
     *
     * @param name the user name
     * @param password the password, with its encoding ({@code {bcrypt}$2a$...}; {@code {noop}} for a test)
     * @param role what the user may do
     */
    public record User(String name, String password, Role role) {

        public User {
            if (password == null || !password.matches("\\{[a-z0-9]+}.+")) {
                throw new IllegalArgumentException(("The password of console user '%s' names no encoding: write it as"
                                + " {bcrypt}<hash> (htpasswd -bnBC 10 \"\" <password> | tr -d ':' makes one), or"
                                + " {noop}<password> for a test")
                        .formatted(name));
            }
        }
    }

    /** What a user may do. */
    public enum Role {
        /** Sees every page, acts on nothing. */
        VIEWER,
        /** Also replays and discards dead letters, and releases and skips parked outbox rows. */
        OPERATOR
    }
}
