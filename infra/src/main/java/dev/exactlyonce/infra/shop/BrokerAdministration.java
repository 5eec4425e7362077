package dev.exactlyonce.infra.shop;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import tools.jackson.databind.json.JsonMapper;

/**
 * Creates and deletes RabbitMQ users and policies, which AMQP cannot do: through the management HTTP API when the
 * broker has it (the broker of {@code compose.yaml}, a Testcontainers broker), or else with {@code rabbitmqctl} on this
 * machine (a local broker). Says what to do when neither is there.
 */
public final class BrokerAdministration {

    private static final JsonMapper json = JsonMapper.builder().build();

    private final @Nullable URI managementApi;

    private final String adminUser;

    private final String adminPassword;

    /** HTTP/1.1: RabbitMQ 4's management server ends a request that asks to upgrade to HTTP/2 with a body. */
    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(2))
            .build();

    /**
     * @param managementApi the management API ({@code http://host:15672/api}), or {@code null} to use
     *     {@code rabbitmqctl}
     * @param adminUser an administrator of the broker
     * @param adminPassword its password
     */
    public BrokerAdministration(@Nullable URI managementApi, String adminUser, String adminPassword) {
        this.managementApi = managementApi;
        this.adminUser = adminUser;
        this.adminPassword = adminPassword;
    }

    /**
     * The management API of a broker on {@code host} when it answers on its port ({@code RABBITMQ_MANAGEMENT_PORT},
     * 15672 unless set: {@code infra/rabbitmq4.sh env} sets it for its node), else {@code rabbitmqctl}.
     */
    public static BrokerAdministration of(String host, String adminUser, String adminPassword) {
        String port = System.getenv().getOrDefault("RABBITMQ_MANAGEMENT_PORT", "15672");
        URI api = URI.create("http://%s:%s/api".formatted(host, port));
        return new BrokerAdministration(answers(api, adminUser, adminPassword) ? api : null, adminUser, adminPassword);
    }

    /** Creates the user, or sets its password and permissions when it exists. */
    public void createUser(ShopBrokerUsers.User user) {
        if (this.managementApi != null) {
            put("/users/" + encode(user.name()), Map.of("password", user.name(), "tags", ""));
            put(
                    "/permissions/%2F/" + encode(user.name()),
                    Map.of("configure", user.configure(), "write", user.write(), "read", user.read()));
            put(
                    "/user-limits/" + encode(user.name()) + "/max-connections",
                    Map.of("value", ShopBrokerUsers.MAX_CONNECTIONS));
            put("/user-limits/" + encode(user.name()) + "/max-channels", Map.of("value", ShopBrokerUsers.MAX_CHANNELS));
            if (user.topic() != null) {
                put(
                        "/topic-permissions/%2F/" + encode(user.name()),
                        Map.of(
                                "exchange",
                                user.topic().exchange(),
                                "write",
                                user.topic().write(),
                                "read",
                                user.topic().read()));
            }
            return;
        }
        if (!rabbitmqctl("add_user", user.name(), user.name())) {
            run("change_password", user.name(), user.name());
        }
        run("set_permissions", "-p", "/", user.name(), user.configure(), user.write(), user.read());
        run(
                "set_user_limits",
                user.name(),
                json.writeValueAsString(Map.of(
                        "max-connections", ShopBrokerUsers.MAX_CONNECTIONS,
                        "max-channels", ShopBrokerUsers.MAX_CHANNELS)));
        if (user.topic() != null) {
            run(
                    "set_topic_permissions",
                    "-p",
                    "/",
                    user.name(),
                    user.topic().exchange(),
                    user.topic().write(),
                    user.topic().read());
        }
    }

    /** Creates the policy on the virtual host {@code /}, or sets it when it exists. */
    public void createPolicy(ShopBrokerPolicies.Policy policy) {
        if (this.managementApi != null) {
            put(
                    "/policies/%2F/" + encode(policy.name()),
                    Map.of("pattern", policy.pattern(), "apply-to", "queues", "definition", policy.definition()));
            return;
        }
        run(
                "set_policy",
                "--apply-to",
                "queues",
                policy.name(),
                policy.pattern(),
                json.writeValueAsString(policy.definition()));
    }

    /** Deletes the policy, if it exists. */
    public void deletePolicy(String name) {
        if (this.managementApi != null) {
            send(HttpRequest.newBuilder(URI.create(this.managementApi + "/policies/%2F/" + encode(name)))
                    .DELETE());
            return;
        }
        rabbitmqctl("clear_policy", name);
    }

    /** Deletes the user, if it exists. */
    public void deleteUser(String name) {
        if (this.managementApi != null) {
            send(HttpRequest.newBuilder(URI.create(this.managementApi + "/users/" + encode(name)))
                    .DELETE());
            return;
        }
        rabbitmqctl("delete_user", name);
    }

    private void put(String path, Map<String, ?> body) {
        HttpResponse<String> response = send(HttpRequest.newBuilder(URI.create(this.managementApi + path))
                .header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(json.writeValueAsString(body))));
        if (response.statusCode() >= 300) {
            throw new IllegalStateException("The broker's management API answered %d to PUT %s: %s"
                    .formatted(response.statusCode(), path, response.body()));
        }
    }

    private HttpResponse<String> send(HttpRequest.Builder request) {
        try {
            return this.http.send(
                    request.header("Authorization", basic(this.adminUser, this.adminPassword))
                            .timeout(Duration.ofSeconds(10))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
        } catch (IOException ex) {
            throw new IllegalStateException("The broker's management API did not answer: " + ex.getMessage(), ex);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while calling the broker's management API", ex);
        }
    }

    private static void run(String... arguments) {
        if (!rabbitmqctl(arguments)) {
            throw new IllegalStateException("rabbitmqctl " + String.join(" ", arguments) + " failed");
        }
    }

    /**
     * Whether the command succeeded: {@code rabbitmqctl} of this machine, or the command {@code RABBITMQCTL} names
     * (such as {@code infra/rabbitmq4.sh ctl}, for the node that script runs).
     */
    private static boolean rabbitmqctl(String... arguments) {
        String named = System.getenv("RABBITMQCTL");
        List<String> command =
                new ArrayList<>(named != null ? List.of(named.trim().split("\\s+")) : List.of("rabbitmqctl"));
        command.add("-q");
        command.addAll(List.of(arguments));
        try {
            Process process =
                    new ProcessBuilder(command).redirectErrorStream(true).start();
            process.getInputStream().readAllBytes();
            return process.waitFor() == 0;
        } catch (IOException ex) {
            throw new IllegalStateException(
                    ("Cannot create the broker's users: its management API does not answer on port 15672 (or"
                                    + " RABBITMQ_MANAGEMENT_PORT), and rabbitmqctl (or RABBITMQCTL) cannot be run"
                                    + " here (%s). Enable the management plugin (rabbitmq-plugins enable"
                                    + " rabbitmq_management), or create the users of infra/rabbitmq/definitions.json"
                                    + " yourself")
                            .formatted(ex.getMessage()),
                    ex);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while running rabbitmqctl", ex);
        }
    }

    private static boolean answers(URI api, String user, String password) {
        try {
            HttpResponse<Void> response = HttpClient.newBuilder()
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(Duration.ofSeconds(1))
                    .build()
                    .send(
                            HttpRequest.newBuilder(URI.create(api + "/overview"))
                                    .header("Authorization", basic(user, password))
                                    .timeout(Duration.ofSeconds(2))
                                    .build(),
                            HttpResponse.BodyHandlers.discarding());
            return response.statusCode() == 200;
        } catch (IOException ex) {
            return false;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static String basic(String user, String password) {
        return "Basic " + Base64.getEncoder().encodeToString((user + ":" + password).getBytes(UTF_8));
    }

    private static String encode(String name) {
        return URLEncoder.encode(name, UTF_8);
    }
}
