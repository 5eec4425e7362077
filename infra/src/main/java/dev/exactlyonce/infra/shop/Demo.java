package dev.exactlyonce.infra.shop;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The main job: finds PostgreSQL and RabbitMQ on localhost (or starts {@code infra/compose.yaml} when a Docker engine is
 * there), makes the shop's databases and roles, runs the three services, the payment provider and the order service,
 * fires all three sources of duplicates, and prints what each service made of them.
 */
public final class Demo {

    private final PrintStream out;

    private final Map<String, String> env;

    public Demo(PrintStream out, Map<String, String> env) {
        this.out = out;
        this.env = env;
    }

    /** Runs the demo; returns the exit status: 0 when every service applied every event exactly once. */
    public int run(int orders) throws Exception {
        return run(orders, Duration.ZERO);
    }

    /**
     * Runs the demo with, in the middle of the stream of events, PostgreSQL taken away from the services for
     * {@code databaseOutage} (none when zero).
     */
    public int run(int orders, Duration databaseOutage) throws Exception {
        this.out.println("Exactly-once effects on at-least-once delivery: the shop, with every ordinary source of"
                + " duplicates firing");
        String pgHost = this.env.getOrDefault("PGHOST", "127.0.0.1");
        int pgPort = Integer.parseInt(this.env.getOrDefault("PGPORT", "5432"));
        String rabbitHost = this.env.getOrDefault("RABBITMQ_HOST", "127.0.0.1");
        int rabbitPort = Integer.parseInt(this.env.getOrDefault("RABBITMQ_PORT", "5672"));
        String pgUser = this.env.getOrDefault("PGUSER", "postgres");
        String pgPassword = this.env.getOrDefault("PGPASSWORD", "");
        String rabbitUser = this.env.getOrDefault("RABBITMQ_USERNAME", "guest");
        String rabbitPassword = this.env.getOrDefault("RABBITMQ_PASSWORD", "guest");
        if (!answers(pgHost, pgPort) || !answers(rabbitHost, rabbitPort)) {
            if (!dockerAvailable()) {
                this.out.printf(
                        ("Nothing to run on: %s. Start PostgreSQL (port %d, a superuser such as postgres) and"
                                + " RabbitMQ (port %d, guest/guest) on localhost, or a Docker engine so that the demo"
                                + " starts infra/compose.yaml. Other hosts: PGHOST, PGPORT, PGUSER, PGPASSWORD,"
                                + " RABBITMQ_HOST, RABBITMQ_PORT.%n"),
                        describeMissing(pgHost, pgPort, rabbitHost, rabbitPort),
                        pgPort,
                        rabbitPort);
                return 2;
            }
            this.out.println("No PostgreSQL or RabbitMQ on localhost: starting them with infra/compose.yaml");
            compose();
            pgPassword = this.env.getOrDefault("PGPASSWORD", "postgres");
            // infra/rabbitmq/definitions.json: the broker's administrator, which no service uses.
            rabbitUser = this.env.getOrDefault("RABBITMQ_USERNAME", "admin");
            rabbitPassword = this.env.getOrDefault("RABBITMQ_PASSWORD", "admin");
        }
        this.out.printf("PostgreSQL %s:%d (as %s), RabbitMQ %s:%d%n", pgHost, pgPort, pgUser, rabbitHost, rabbitPort);
        Path logs = Path.of("infra", "target", "demo");
        Files.createDirectories(logs);
        ShopScenario.Settings settings = new ShopScenario.Settings(
                pgHost,
                pgPort,
                pgUser,
                pgPassword,
                rabbitHost,
                rabbitPort,
                rabbitUser,
                rabbitPassword,
                Path.of("."),
                "",
                logs);
        try (ShopScenario shop = new ShopScenario(settings, this.out::println)) {
            Runtime.getRuntime().addShutdownHook(new Thread(shop::close, "demo-stop"));
            shop.start();
            shop.run(orders, () -> {
                if (!databaseOutage.isZero()) {
                    shop.cutDatabaseFor(databaseOutage);
                }
            });
            Report report = shop.report();
            report.print(this.out);
            return report.exactlyOnce() ? 0 : 1;
        }
    }

    private String describeMissing(String pgHost, int pgPort, String rabbitHost, int rabbitPort) {
        StringBuilder missing = new StringBuilder();
        if (!answers(pgHost, pgPort)) {
            missing.append("no PostgreSQL answers on %s:%d".formatted(pgHost, pgPort));
        }
        if (!answers(rabbitHost, rabbitPort)) {
            missing.append(missing.isEmpty() ? "" : ", ")
                    .append("no RabbitMQ answers on %s:%d".formatted(rabbitHost, rabbitPort));
        }
        return missing.append(", and no Docker engine is available").toString();
    }

    private static boolean answers(String host, int port) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(host, port), 1_000);
            return true;
        } catch (IOException ex) {
            return false;
        }
    }

    private static boolean dockerAvailable() {
        try {
            Process docker = new ProcessBuilder("docker", "info")
                    .redirectErrorStream(true)
                    .start();
            docker.getInputStream().transferTo(OutputStream.nullOutputStream());
            return docker.waitFor(20, TimeUnit.SECONDS) && docker.exitValue() == 0;
        } catch (IOException ex) {
            return false;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private void compose() throws IOException, InterruptedException {
        Process compose = new ProcessBuilder("docker", "compose", "-f", "infra/compose.yaml", "up", "-d", "--wait")
                .inheritIO()
                .start();
        if (compose.waitFor() != 0) {
            throw new IllegalStateException("docker compose -f infra/compose.yaml up failed; see its output above");
        }
    }
}
