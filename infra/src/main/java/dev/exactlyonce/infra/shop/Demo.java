package dev.exactlyonce.infra.shop;

import dev.exactlyonce.idempotency.test.TestKafkaCluster;
import dev.exactlyonce.idempotency.test.TestRabbitCluster;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * The main job: finds PostgreSQL (or MariaDB) and RabbitMQ on localhost (or starts what is missing of them from
 * {@code infra/compose.yaml} when a Docker engine is there), makes the shop's databases and roles, runs the three
 * services, the payment provider and the order service, fires all three sources of duplicates, and prints what each
 * service made of them.
 */
public final class Demo {

    /** The administrator the demo makes on the broker of the compose file, which has none. */
    private static final String COMPOSE_ADMINISTRATOR = "demo-admin";

    private final PrintStream out;

    private final Map<String, String> env;

    public Demo(PrintStream out, Map<String, String> env) {
        this.out = out;
        this.env = env;
    }

    /**
     * Runs the demo; returns the exit status: 0 when every service applied every event exactly once.
     *
     * @param product the database server the shop runs on: {@code postgresql} or {@code mariadb}
     * @param orders how many orders are placed
     * @param databaseOutage how long the database is taken away from the services in the middle of the stream of
     *     events (none when zero)
     * @param providerFreeze how long the payment provider is frozen (answers nothing) from the first order on, while
     *     every source of duplicates fires (none when zero)
     * @param binder the broker the shop runs on: {@code rabbitmq}, or {@code kafka} (the services' kafka profile;
     *     the brokers {@code KAFKA_BROKERS} names, or one started in this process)
     * @param cluster whether the shop runs on the three-node cluster of that broker the environment names
     *     ({@code RABBITMQ_CLUSTER} and {@code RABBITMQ_CLUSTER_CONTROL}, or {@code KAFKA_CLUSTER} and
     *     {@code KAFKA_CLUSTER_CONTROL}: infra/cluster.sh), one node of which is killed and another cut off mid-run
     * @param console whether the shop keeps running after the report, watched by the operator console, until the
     *     process is stopped
     */
    public int run(
            String product,
            int orders,
            Duration databaseOutage,
            Duration providerFreeze,
            String binder,
            boolean cluster,
            boolean console)
            throws Exception {
        boolean kafka = binder.equals("kafka");
        if (kafka && console) {
            this.out.println("--console watches the shop's RabbitMQ queues: run it without --binder kafka.");
            return 2;
        }
        this.out.println("Exactly-once effects on at-least-once delivery: the shop, with every ordinary source of"
                + " duplicates firing");
        ShopDatabases.Server database = ShopDatabases.Server.fromEnvironment(product, this.env);
        TestRabbitCluster nodes = TestRabbitCluster.fromEnvironment();
        List<String> rabbitNodes = cluster && !kafka ? List.of(nodes.addresses().split(",")) : List.of();
        String rabbitHost = !rabbitNodes.isEmpty()
                ? rabbitNodes.get(0).substring(0, rabbitNodes.get(0).lastIndexOf(':'))
                : this.env.getOrDefault("RABBITMQ_HOST", "127.0.0.1");
        int rabbitPort = !rabbitNodes.isEmpty()
                ? Integer.parseInt(
                        rabbitNodes.get(0).substring(rabbitNodes.get(0).lastIndexOf(':') + 1))
                : Integer.parseInt(this.env.getOrDefault("RABBITMQ_PORT", "5672"));
        String rabbitUser = this.env.getOrDefault("RABBITMQ_USERNAME", "guest");
        String rabbitPassword = this.env.getOrDefault("RABBITMQ_PASSWORD", "guest");
        boolean databaseMissing = !answers(database.host(), database.port());
        boolean brokerMissing = !kafka && !answers(rabbitHost, rabbitPort);
        if (databaseMissing || brokerMissing) {
            if (!dockerAvailable()) {
                String rabbitMq = kafka ? "" : " and RabbitMQ (port %d, guest/guest)".formatted(rabbitPort);
                this.out.printf(
                        ("Nothing to run on: %s. Start %s (port %d, %s)%s on localhost, or a Docker engine so that the"
                                + " demo starts infra/compose.yaml. Other hosts: %s%s.%n"),
                        describeMissing(database, brokerMissing, rabbitHost, rabbitPort),
                        database.displayName(),
                        database.port(),
                        database.administrator(),
                        rabbitMq,
                        database.environment(),
                        kafka ? "" : ", RABBITMQ_HOST, RABBITMQ_PORT");
                return 2;
            }
            // Only what is missing: a server that answers on its port is used as it is.
            List<String> missing = new ArrayList<>();
            if (databaseMissing) {
                missing.add(database.composeService());
            }
            if (brokerMissing) {
                missing.add("rabbitmq");
            }
            this.out.printf("Starting %s with infra/compose.yaml%n", String.join(" and ", missing));
            compose(missing);
            if (databaseMissing) {
                database = database.asComposeAdministrator(this.env);
            }
        }
        boolean composeBroker = !kafka
                && !cluster
                && List.of("127.0.0.1", "localhost").contains(rabbitHost)
                && rabbitPort == 5672
                && composeBrokerRuns();
        if (!this.env.containsKey("RABBITMQ_USERNAME") && composeBroker) {
            // The broker of compose.yaml has no administrator: its definitions hold none, and a broker that loads
            // definitions at boot makes no default user. The demo makes one for itself, with a password of the run.
            rabbitUser = COMPOSE_ADMINISTRATOR;
            rabbitPassword = UUID.randomUUID().toString();
            composeAdministrator(rabbitUser, rabbitPassword);
        }
        EmbeddedKafkaKraftBroker embedded = null;
        ShopBroker broker;
        if (!kafka) {
            broker = ShopBroker.rabbitMq(
                    cluster ? rabbitNodes : List.of(rabbitHost + ":" + rabbitPort),
                    rabbitUser,
                    rabbitPassword,
                    cluster ? nodes : null);
        } else if (cluster) {
            TestKafkaCluster kafkaCluster = TestKafkaCluster.fromEnvironment();
            broker = ShopBroker.kafka(kafkaCluster.brokers(), kafkaCluster);
        } else if (this.env.containsKey("KAFKA_BROKERS")) {
            broker = ShopBroker.kafka(this.env.get("KAFKA_BROKERS"), null);
        } else {
            this.out.println("Starting a Kafka broker in this process (KAFKA_BROKERS names none)");
            embedded = new EmbeddedKafkaKraftBroker(1, 3);
            embedded.afterPropertiesSet();
            broker = ShopBroker.kafka(embedded.getBrokersAsString(), null);
        }
        this.out.printf(
                "%s %s:%d (as %s), %s%n",
                database.displayName(), database.host(), database.port(), database.adminUser(), broker.describe());
        Path logs = Path.of("infra", "target", "demo");
        Files.createDirectories(logs);
        ShopScenario.Settings settings = new ShopScenario.Settings(database, broker, Path.of("."), "", logs);
        try (ShopScenario shop = new ShopScenario(settings, this.out::println)) {
            Runtime.getRuntime().addShutdownHook(new Thread(shop::close, "demo-stop"));
            shop.start();
            if (!providerFreeze.isZero()) {
                // From the first order on: billing has every order to charge while the provider answers nothing.
                shop.freezeProviderFor(providerFreeze);
            }
            shop.run(orders, () -> {
                if (!databaseOutage.isZero()) {
                    shop.cutDatabaseFor(databaseOutage);
                }
                if (cluster) {
                    shop.faultClusterNodes(Duration.ofSeconds(30));
                }
            });
            Report report = shop.report();
            report.print(this.out);
            if (console) {
                watch(
                        shop,
                        cluster ? String.join(",", rabbitNodes) : rabbitHost + ":" + rabbitPort,
                        rabbitHost,
                        rabbitUser,
                        rabbitPassword,
                        logs);
            }
            return report.exactlyOnce() ? 0 : 1;
        } finally {
            if (embedded != null) {
                embedded.destroy();
            }
        }
    }

    /**
     * Starts the operator console on the running shop (its jar, as the services run from theirs), prints where it
     * answers and a password of the run, and waits until the process is stopped: the shop and the console stop with it.
     */
    private void watch(
            ShopScenario shop,
            String rabbitAddresses,
            String rabbitHost,
            String rabbitUser,
            String rabbitPassword,
            Path logs)
            throws InterruptedException {
        String password = UUID.randomUUID().toString();
        List<String> properties = new ArrayList<>();
        for (int i = 0; i < ShopScenario.SERVICES.size(); i++) {
            String service = ShopScenario.SERVICES.get(i).name();
            properties.add("console.services[%d].name=%s".formatted(i, service));
            properties.add("console.services[%d].instances[0]=%s".formatted(i, shop.managementUrl(service)));
            properties.add("console.services[%d].queues[0]=%s".formatted(i, shop.queue(service)));
        }
        properties.addAll(List.of(
                "console.users[0].name=operator",
                "console.users[0].password={noop}" + password,
                "console.users[0].role=operator",
                "console.broker.management-url=http://%s:%s"
                        .formatted(rabbitHost, this.env.getOrDefault("RABBITMQ_MANAGEMENT_PORT", "15672")),
                "console.broker.addresses=" + rabbitAddresses,
                "console.broker.username=" + rabbitUser,
                "console.broker.password=" + rabbitPassword,
                "console.audit-log=" + logs.resolve("console-audit.log")));
        ServiceProcess console = ServiceProcess.start(
                ServiceProcess.jar(Path.of("infra"), "console"), "console", properties, logs.resolve("console.log"));
        Runtime.getRuntime().addShutdownHook(new Thread(console::close, "console-stop"));
        this.out.printf(
                "%nThe operator console watches the shop: http://127.0.0.1:8090, user operator, password %s."
                        + " The shop keeps running; Ctrl-C stops both.%n",
                password);
        new CountDownLatch(1).await();
    }

    private String describeMissing(
            ShopDatabases.Server database, boolean brokerMissing, String rabbitHost, int rabbitPort) {
        StringBuilder missing = new StringBuilder();
        if (!answers(database.host(), database.port())) {
            missing.append(
                    "no %s answers on %s:%d".formatted(database.displayName(), database.host(), database.port()));
        }
        if (brokerMissing) {
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

    /** Whether the broker of the compose file runs (started by this run of the demo or an earlier one). */
    private static boolean composeBrokerRuns() throws IOException, InterruptedException {
        if (!dockerAvailable()) {
            return false;
        }
        Process ps = new ProcessBuilder(
                        "docker", "compose", "-f", "infra/compose.yaml", "ps", "--status", "running", "-q", "rabbitmq")
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        boolean running = !new String(ps.getInputStream().readAllBytes()).isBlank();
        return ps.waitFor() == 0 && running;
    }

    /**
     * Makes the user an administrator of the compose file's broker with that password (or gives it that password,
     * when an earlier run made it), with {@code rabbitmqctl} in the broker's container: the password goes in the
     * environment of {@code docker}, never on a command line of this machine.
     */
    private static void composeAdministrator(String user, String password) throws IOException, InterruptedException {
        ProcessBuilder command = new ProcessBuilder(
                        "docker",
                        "compose",
                        "-f",
                        "infra/compose.yaml",
                        "exec",
                        "-T",
                        "-e",
                        "DEMO_ADMIN_PASSWORD",
                        "rabbitmq",
                        "sh",
                        "-c",
                        ("(rabbitmqctl -q add_user %1$s \"$DEMO_ADMIN_PASSWORD\" 2>/dev/null"
                                        + " || rabbitmqctl -q change_password %1$s \"$DEMO_ADMIN_PASSWORD\")"
                                        + " && rabbitmqctl -q set_user_tags %1$s administrator"
                                        + " && rabbitmqctl -q set_permissions -p / %1$s '.*' '.*' '.*'")
                                .formatted(user))
                .inheritIO();
        command.environment().put("DEMO_ADMIN_PASSWORD", password);
        if (command.start().waitFor() != 0) {
            throw new IllegalStateException("Could not make the demo's administrator on the broker of"
                    + " infra/compose.yaml (docker compose exec rabbitmq rabbitmqctl failed; see its output above)");
        }
    }

    /** Starts those services of the compose file (MariaDB's through its profile). */
    private void compose(List<String> services) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("docker", "compose", "-f", "infra/compose.yaml"));
        if (services.contains("mariadb")) {
            command.addAll(List.of("--profile", "mariadb"));
        }
        command.addAll(List.of("up", "-d", "--wait"));
        command.addAll(services);
        Process compose = new ProcessBuilder(command).inheritIO().start();
        if (compose.waitFor() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed; see its output above");
        }
    }
}
