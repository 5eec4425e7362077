package dev.exactlyonce.infra.shop;

import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.paymentprovider.PaymentProvider;
import java.io.IOException;
import java.math.BigDecimal;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The shop, run: the three services from their jars, the payment provider, the order service and its outbox relay, on
 * one database server (PostgreSQL or MariaDB) and one broker ({@link ShopBroker}: RabbitMQ or Kafka); then a scenario
 * in which all three ordinary sources of duplicates fire, and a report of what each service made of it.
 *
 * <p>On RabbitMQ, the services reach each node through a TCP proxy of the run, which drops every broker connection at
 * once (the broker then redelivers what was unacknowledged); they acknowledge every 20 messages, so that a drop finds
 * committed messages whose acknowledgement it loses. On Kafka, the services are killed instead (a group then reads
 * again from its last committed offsets). On a cluster ({@link #faultClusterNodes}), they are given every node, and
 * the run kills one node and cuts off another while the events of its replay flow.
 */
public final class ShopScenario implements AutoCloseable {

    /**
     * Where things are, and how the run's names differ from another run's.
     *
     * @param broker the broker the shop runs on, RabbitMQ or Kafka, one node or a cluster
     */
    public record Settings(
            ShopDatabases.Server database, ShopBroker broker, Path servicesDir, String suffix, Path logs) {}

    /**
     * A service of the shop.
     *
     * @param name its name, such as {@code stock-service}
     * @param database its database
     * @param binding its guarded binding
     * @param events the events it consumes
     * @param emits the events it emits, through its outbox
     */
    public record Service(String name, String database, String binding, List<String> events, List<String> emits) {

        String queue(String suffix) {
            return this.name.substring(0, this.name.indexOf('-')) + ".events" + suffix;
        }
    }

    /** What stock-service emits through its outbox once it reserved an order, and shipping-service consumes. */
    public static final String STOCK_RESERVED = "stock.stock.reserved.v1";

    public static final List<Service> SERVICES = List.of(
            new Service(
                    "stock-service",
                    "stock",
                    "idempotencyGuardreserveStock-in-0",
                    List.of(OrderService.PLACED),
                    List.of(STOCK_RESERVED)),
            new Service(
                    "shipping-service",
                    "shipping",
                    "idempotencyGuardtrackOrderStatus-in-0",
                    List.of(OrderService.PLACED, OrderService.STATUS_CHANGED, STOCK_RESERVED),
                    List.of()),
            new Service(
                    "billing-service",
                    "billing",
                    "idempotencyGuardinvoiceOrder-in-0",
                    List.of(OrderService.PLACED),
                    List.of()));

    private static final JsonMapper json = JsonMapper.builder().build();

    /** The ports {@link #freePort} handed out. */
    private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();

    private final Settings settings;

    private final Consumer<String> progress;

    private final long started = System.nanoTime();

    /**
     * Ends the faults the scenario makes for a while (a database outage, a provider's freeze) when their time is up: two
     * threads, since ending an outage waits for the services to resume, and daemons, which the scenario's close stops.
     */
    private final ScheduledExecutorService faultEnds = Executors.newScheduledThreadPool(2, task -> {
        Thread thread = new Thread(task, "shop-fault-end");
        thread.setDaemon(true);
        return thread;
    });

    private final ShopDatabases databases;

    private final Map<String, ServiceProcess> processes = new LinkedHashMap<>();

    private final Map<String, Integer> ports = new LinkedHashMap<>();

    private final Map<String, Integer> managementPorts = new LinkedHashMap<>();

    private final Map<String, JdbcTemplate> jdbc = new LinkedHashMap<>();

    private final List<HikariDataSource> dataSources = new ArrayList<>();

    private final List<OrderService.PlacedOrder> orders = new ArrayList<>();

    private final HttpClient http = HttpClient.newHttpClient();

    private PaymentProvider provider;

    /** The cluster's faults, under way or over (none on a single node). */
    private @Nullable Thread clusterFaults;

    /** Between the services and their database server, to take the database away from them. */
    private TcpProxy databaseLink;

    /** Between billing-service and the payment provider: frozen to make the provider stop answering. */
    private TcpProxy providerLink;

    private final ShopBroker broker;

    private OrderService orderService;

    private boolean closed;

    /** When the outage under way (the database's, the payment provider's) ends, in {@link System#nanoTime()}. */
    private volatile long outageEnds = System.nanoTime();

    public ShopScenario(Settings settings, Consumer<String> progress) {
        this.settings = settings;
        this.progress = progress;
        this.databases = ShopDatabases.on(settings.database(), settings.suffix());
        this.broker = settings.broker();
    }

    /** Makes the databases, resets the broker, and starts the provider, the services and the order service. */
    public ShopScenario start() throws Exception {
        this.databases.recreate();
        say(
                "databases %s recreated, each owned by a role of its own that no other role can connect to",
                String.join(
                        ", ",
                        ShopDatabases.NAMES.stream().map(this.databases::name).toList()));
        say("%s: %s", this.broker.describe(), this.broker.prepare(this.settings.suffix()));
        this.provider = PaymentProvider.start(0);
        this.providerLink = TcpProxy.to("127.0.0.1", this.provider.port());
        this.databaseLink = TcpProxy.to(
                this.settings.database().host(), this.settings.database().port());
        say("payment provider on %s", this.provider.url());
        for (Service service : SERVICES) {
            this.ports.put(service.name(), freePort());
            this.managementPorts.put(service.name(), freePort());
            this.jdbc.put(service.name(), jdbc(service.database()));
        }
        startServices();
        waitFor(this.broker::servicesReady, "the services' queues or consumer groups on the broker");
        this.broker.servicesStarted();
        say(
                "%s started from their jars (logs in %s)",
                String.join(", ", this.processes.keySet()), this.settings.logs());
        this.orderService = startOrderService();
        say("order service started, emitting through the library's outbox, published by its relay");
        return this;
    }

    /**
     * Runs the scenario: {@code count} orders, each placed then changed three times, published by the relay as they
     * commit; then one more change each, which the relay publishes and fails to mark (its database refuses the commit
     * once), so that it publishes them again; every broker connection of the services drops once; the first half of
     * the period is replayed. {@code midway} runs between the connection drop and the replay.
     */
    public void run(int count, Runnable midway) throws Exception {
        Instant from = Instant.now();
        for (int i = 0; i < count; i++) {
            this.orders.add(this.orderService.placeOrder());
        }
        Instant middle = Instant.now();
        for (int version = 2; version <= 4; version++) {
            for (OrderService.PlacedOrder order : this.orders) {
                this.orderService.advance(order.orderId());
            }
        }
        waitFor(() -> this.orderService.unpublished() == 0, "the order service's outbox to be published");
        say(
                "order service: %d orders placed, %d status changes; %d events in its outbox, published by its relay"
                        + " as they committed",
                count, 3 * count, this.orderService.events());

        // The relay is held while the next changes commit, so that one run publishes them all; its database then
        // refuses that run's commit, once: the broker confirmed the events, and they are still unpublished. What the
        // relay published beyond one copy of each is what it published again.
        this.orderService.holdRelay(true);
        for (int i = 0; i < count; i++) {
            this.orderService.advance(this.orders.get(i).orderId());
        }
        int waiting = this.orderService.unpublished();
        int publishedBefore = this.orderService.published();
        this.databases.refuseFirstOutboxMark("orders");
        this.orderService.holdRelay(false);
        waitFor(
                () -> this.orderService.unpublished() == 0,
                "the order service's relay to publish again what it could not mark");
        int refused = this.orderService.published() - publishedBefore - waiting;
        this.databases.acceptOutboxMarks("orders");
        if (refused <= 0) {
            throw new IllegalStateException("The order service's database was to refuse the relay's first mark once,"
                    + " and the relay published nothing a second time: the first source of duplicates did not fire");
        }
        say(
                "duplicate source 1, the relay: its commit after the broker confirmed %d event(s) failed; its next run"
                        + " published them again, with their ids",
                refused);

        waitFor(
                () -> processed("shipping-service") >= this.orderService.events() / 2,
                "some of the events to be processed");
        if (this.broker.dropConnections()) {
            say("duplicate source 2, the broker: every service's broker connection dropped; the broker redelivers"
                    + " what was delivered and not acknowledged, committed or not");
        } else {
            SERVICES.forEach(service -> this.processes.get(service.name()).kill());
            startServices();
            say("duplicate source 2, the broker: every service killed (kill -9) and started again; each group reads"
                    + " again from its last committed offsets what was delivered, committed or not");
        }

        for (Service emitting : SERVICES) {
            if (!emitting.emits().isEmpty()) {
                killWithUnpublishedEvents(emitting);
            }
        }

        midway.run();

        int replayed = this.orderService.republish(from, middle);
        waitFor(() -> this.orderService.unpublished() == 0, "the replayed events to be published");
        say("duplicate source 3, a replay: the %d events of the first half of the period published again", replayed);
        for (Service emitting : SERVICES) {
            if (!emitting.emits().isEmpty()) {
                replayOutbox(emitting);
            }
        }
        if (this.clusterFaults != null) {
            this.clusterFaults.join();
        }
        awaitQuiet();
    }

    /** Kills the service with {@code kill -9} and starts it again. */
    public void killAndRestart(String service) {
        this.processes.get(service).kill();
        say("%s killed (kill -9) in the middle of its work", service);
        startService(
                SERVICES.stream()
                        .filter(s -> s.name().equals(service))
                        .findFirst()
                        .orElseThrow(),
                false);
        say("%s started again", service);
    }

    /**
     * Kills an emitting service, whose relay was held back, once its outbox holds committed events: they were never
     * published when the process died. Started again, its relay publishes them.
     */
    private void killWithUnpublishedEvents(Service service) throws Exception {
        JdbcTemplate db = this.jdbc.get(service.name());
        waitFor(() -> unpublished(db) > 0, "events in the outbox of " + service.name());
        this.processes.get(service.name()).kill();
        say(
                "%s killed (kill -9) with %d event(s) %s committed in its outbox and not yet published",
                service.name(), unpublished(db), service.emits());
        // It ran without its relay, which the schema registered; the registration is changed as an operator would,
        // every instance stopped (outbox_publisher: an instance that disagreed with it would refuse to start).
        db.update("DELETE FROM outbox_publisher");
        startService(service, false);
        say("%s started again; its outbox relay publishes what the killed process committed", service.name());
    }

    /**
     * Replays everything an emitting service's outbox published, as an operator would ({@code Outbox.republish} in
     * the service, or the same statement): its relay publishes the events again, with the ids they were written with.
     */
    private void replayOutbox(Service service) throws Exception {
        JdbcTemplate db = this.jdbc.get(service.name());
        waitFor(() -> unpublished(db) == 0, "the outbox of " + service.name() + " to be published");
        int replayed = db.update("UPDATE outbox_event SET published_at = NULL WHERE published_at IS NOT NULL");
        waitFor(() -> unpublished(db) == 0, "the outbox of " + service.name() + " to be published again");
        say(
                "and on the second hop: %s's outbox replayed, its %d event(s) %s published again with their ids",
                service.name(), replayed, service.emits());
    }

    private static int unpublished(JdbcTemplate db) {
        return count(db, "SELECT count(*) FROM outbox_event WHERE published_at IS NULL");
    }

    /** The events a service must process: one per order, or every order event and stock reservation (shipping). */
    private int expected(Service service) {
        return service.events().contains(OrderService.STATUS_CHANGED)
                ? this.orderService.events() + this.orders.size()
                : this.orders.size();
    }

    /** The queue a service of the shop consumes, such as {@code billing.events}. */
    public String queue(String service) {
        return SERVICES.stream()
                .filter(one -> one.name().equals(service))
                .findFirst()
                .orElseThrow()
                .queue(this.settings.suffix());
    }

    /** The management URL of a service of the shop, such as {@code http://127.0.0.1:41234}. */
    public URI managementUrl(String service) {
        return URI.create("http://127.0.0.1:" + this.managementPorts.get(service));
    }

    /** What each service made of the scenario. */
    public Report report() throws Exception {
        List<Report.ServiceReport> services = new ArrayList<>();
        Map<UUID, String> statuses = this.orderService.statuses();
        int lines =
                this.orders.stream().mapToInt(OrderService.PlacedOrder::lines).sum();
        BigDecimal billed =
                this.orders.stream().map(OrderService.PlacedOrder::amount).reduce(BigDecimal.ZERO, BigDecimal::add);
        for (Service service : SERVICES) {
            JdbcTemplate db = this.jdbc.get(service.name());
            int expected = expected(service);
            List<String> effects = new ArrayList<>();
            List<String> differences = new ArrayList<>();
            switch (service.name()) {
                case "stock-service" -> {
                    int reservations = count(db, "SELECT count(*) FROM reservation");
                    effects.add(reservations + " reservations");
                    if (reservations != lines) {
                        differences.add("%d reservations for %d order lines".formatted(reservations, lines));
                    }
                    int emitted = count(db, "SELECT count(*) FROM outbox_event");
                    if (emitted != this.orders.size()) {
                        differences.add(
                                "%d %s emitted for %d orders".formatted(emitted, STOCK_RESERVED, this.orders.size()));
                    }
                }
                case "shipping-service" -> {
                    Map<UUID, String> copied = new LinkedHashMap<>();
                    db.query("SELECT order_id, status, version FROM order_status", row -> {
                        copied.put(row.getObject(1, UUID.class), row.getString(2) + "@" + row.getLong(3));
                    });
                    long newest = statuses.entrySet().stream()
                            .filter(status -> status.getValue().equals(copied.get(status.getKey())))
                            .count();
                    effects.add(newest + " newest statuses");
                    if (newest != statuses.size() || copied.size() != statuses.size()) {
                        differences.add("%d of %d orders at their newest status".formatted(newest, statuses.size()));
                    }
                    int reserved = count(db, "SELECT count(DISTINCT order_id) FROM order_stock");
                    int reservedTwice = count(
                            db,
                            "SELECT count(*) FROM (SELECT 1 FROM order_stock GROUP BY order_id HAVING count(*) > 1) t");
                    effects.add(reserved + " stock reservations");
                    if (reserved != this.orders.size() || reservedTwice > 0) {
                        differences.add("stock reserved for %d of %d orders, %d of them more than once"
                                .formatted(reserved, this.orders.size(), reservedTwice));
                    }
                }
                default -> {
                    int invoices = count(db, "SELECT count(*) FROM invoice");
                    BigDecimal amount =
                            db.queryForObject("SELECT coalesce(sum(amount), 0) FROM invoice", BigDecimal.class);
                    int charges = this.provider.chargeCount();
                    effects.add(invoices + " invoices, " + charges + " charges");
                    if (invoices != this.orders.size() || charges != this.orders.size()) {
                        differences.add("%d invoices and %d charges for %d orders"
                                .formatted(invoices, charges, this.orders.size()));
                    }
                    if (amount.compareTo(billed) != 0) {
                        differences.add("invoiced %s for %s ordered".formatted(amount, billed));
                    }
                }
            }
            int processed = processed(service.name());
            if (processed != expected) {
                differences.add("%d events processed of %d".formatted(processed, expected));
            }
            int deadLetters = this.broker.deadLetters(service);
            if (deadLetters > 0) {
                differences.add(deadLetters + " dead letters");
            }
            double duplicates = meter(service.name(), "idempotency.events.duplicates");
            // From its first event processed to its last, on the database's clock.
            double took = db.queryForObject(
                    "SELECT min(processed_at), max(processed_at) FROM processed_event",
                    (row, n) -> seconds(row.getTimestamp(1), row.getTimestamp(2)));
            services.add(new Report.ServiceReport(
                    service.name(),
                    expected,
                    processed,
                    (long) duplicates,
                    deadLetters,
                    took,
                    String.join(", ", effects),
                    differences));
        }
        JdbcTemplate stock = this.jdbc.get("stock-service");
        Report.Hop hop = new Report.Hop(
                STOCK_RESERVED,
                "stock-service",
                "shipping-service",
                count(stock, "SELECT count(*) FROM outbox_event WHERE type = '" + STOCK_RESERVED + "'"),
                count(this.jdbc.get("shipping-service"), "SELECT count(*) FROM order_stock"));
        return new Report(this.orderService.events(), this.orderService.published(), List.of(hop), services);
    }

    /**
     * Takes the database server away from the services for {@code outage} (the proxy between them is cut; the server,
     * and the order service, go on), then gives it back and says how soon the services' queues moved again.
     */
    public void cutDatabaseFor(Duration outage) {
        this.outageEnds = Math.max(this.outageEnds, System.nanoTime() + outage.toNanos());
        this.databaseLink.cut();
        say(
                "the services' %s is away for %d s (the connections between them are cut), while events keep coming",
                this.settings.database().displayName(), outage.toSeconds());
        this.faultEnds.schedule(
                () -> {
                    try {
                        int queued;
                        int processed;
                        try {
                            queued = queued();
                            processed = processed();
                        } finally {
                            this.databaseLink.restore();
                        }
                        long restored = System.nanoTime();
                        say(
                                "%s is back for the services, %d message(s) queued",
                                this.settings.database().displayName(), queued);
                        // The first event a service commits after the outage: its consumption resumed.
                        waitFor(() -> processedMoreThan(processed), "the services to process events again");
                        say(
                                "the services resumed %.1f s after %s answered again",
                                (System.nanoTime() - restored) / 1e9,
                                this.settings.database().displayName());
                    } catch (Exception ex) {
                        say("the database outage did not end as planned: %s", ex);
                    }
                },
                outage.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    /**
     * Freezes the payment provider for {@code freeze}, as a process stopped with {@code SIGSTOP} would be: billing's
     * connections stay open and new ones are accepted, but nothing is answered (billing's requests time out, an outage
     * the service declares), then everything that waited is answered; says how many charges the provider made once it
     * answers again.
     */
    public void freezeProviderFor(Duration freeze) {
        this.outageEnds = Math.max(this.outageEnds, System.nanoTime() + freeze.toNanos());
        this.providerLink.freeze();
        say(
                "the payment provider is frozen for %d s (billing's requests go unanswered), while events keep coming",
                freeze.toSeconds());
        this.faultEnds.schedule(
                () -> {
                    try {
                        int charges = this.provider.chargeCount();
                        this.providerLink.thaw();
                        say("the payment provider answers again, %d charge(s) made so far", charges);
                    } catch (Exception ex) {
                        say("the payment provider's freeze did not end as planned: %s", ex);
                    }
                },
                freeze.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    /**
     * Makes the payment provider refuse every charge ({@code 403}), or charge again: while it refuses, billing
     * dead-letters each placed order it could not charge (a refusal is not retried), for an operator to replay once the
     * provider charges again.
     */
    public void refuseCharges(boolean refusing) {
        this.provider.refuseCharges(refusing);
        say(refusing ? "the payment provider refuses every charge (403)" : "the payment provider charges again");
    }

    /**
     * On a cluster, while the run goes on, on a thread of its own: kills ({@code kill -9}) the node that leads what
     * stock-service consumes (its queue, or the first partition of its topic), starts it again once the services
     * drained their queues without it, then cuts another node off from the other two and from the services for
     * {@code cutOff}, and heals it. Says how soon after each fault the queues were drained (every event that came
     * meanwhile handled). {@link #run} waits for it before it waits for the queues to drain.
     */
    public void faultClusterNodes(Duration cutOff) {
        if (!this.broker.cluster()) {
            throw new IllegalStateException(this.broker.describe() + " is no cluster whose nodes the run may fault");
        }
        String node = this.broker.nodeName();
        Thread faults = new Thread(
                () -> {
                    try {
                        ShopBroker.Leader leader = this.broker.leaderOf(SERVICES.get(0));
                        long killed = System.nanoTime();
                        this.broker.control("kill", Integer.toString(leader.node()));
                        say("%s %d, which leads %s, killed (kill -9)", node, leader.node(), leader.of());
                        awaitDrained(killed);
                        this.broker.control("start", Integer.toString(leader.node()));
                        say(
                                "%s %d started again, into the cluster, %.1f s after it was killed",
                                node, leader.node(), since(killed));
                        int other = leader.node() % 3 + 1;
                        long cut = System.nanoTime();
                        this.broker.control("cut", Integer.toString(other));
                        say(
                                "%s %d cut off from the other nodes and from the services for %d s",
                                node, other, cutOff.toSeconds());
                        awaitDrained(cut);
                        LockSupport.parkNanos(Math.max(0, cut + cutOff.toNanos() - System.nanoTime()));
                        this.broker.control("heal");
                        // A RabbitMQ node paused while cut off (pause_minority) serves again once it has rejoined the
                        // other two; a Kafka broker goes on by itself.
                        this.broker.control("start", Integer.toString(other));
                        say("%s %d healed, back in the cluster %.1f s after it was cut off", node, other, since(cut));
                    } catch (Exception ex) {
                        say("the cluster's faults did not go as planned: %s", ex);
                    }
                },
                "cluster-faults");
        faults.setDaemon(true);
        this.clusterFaults = faults;
        faults.start();
    }

    /** Waits (up to two minutes) until the services' queues are empty, and says how soon after the fault they were. */
    private void awaitDrained(long fault) throws Exception {
        // The events of the run's replays, published meanwhile, are on their way: the queues are drained twice.
        LockSupport.parkNanos(Duration.ofSeconds(2).toNanos());
        waitFor(() -> queuedOrNot() == 0, "the services to drain their queues after the fault");
        say("the services' queues drained %.1f s after the fault", since(fault));
    }

    /** The messages queued, or -1 while the broker does not say. */
    private int queuedOrNot() {
        try {
            return queued();
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return -1;
        } catch (Exception ex) {
            return -1;
        }
    }

    private static double since(long nanoTime) {
        return (System.nanoTime() - nanoTime) / 1e9;
    }

    public ShopDatabases databases() {
        return this.databases;
    }

    /** The names of the run on the broker: RabbitMQ's exchanges and queues, Kafka's topics. */
    public List<String> brokerNames() {
        return this.broker.names();
    }

    @Override
    public synchronized void close() {
        if (this.closed) {
            return;
        }
        this.closed = true;
        this.faultEnds.shutdownNow();
        if (this.orderService != null) {
            this.orderService.close();
        }
        this.processes.values().forEach(ServiceProcess::close);
        if (this.provider != null) {
            this.provider.close();
        }
        if (this.databaseLink != null) {
            this.databaseLink.close();
        }
        if (this.providerLink != null) {
            this.providerLink.close();
        }
        this.broker.close();
        this.dataSources.forEach(HikariDataSource::close);
    }

    /** Starts the order service on its database, as its role, publishing through the broker as its relay's user. */
    private OrderService startOrderService() {
        String role = this.databases.name("orders");
        List<String> properties = new ArrayList<>(List.of(
                "spring.datasource.url=" + this.databases.url(role),
                "spring.datasource.username=" + role,
                "spring.datasource.password=" + role,
                // The scenario says what the relay's failure was; the relay's own warning would repeat it, and so
                // would MariaDB's driver, which logs every error the server answers.
                "logging.level.dev.exactlyonce.idempotency.outbox.OutboxRelay=ERROR",
                "logging.level.org.mariadb.jdbc.message.server.ErrorPacket=ERROR"));
        properties.addAll(this.broker.orderServiceProperties());
        return OrderService.start(this.databases.orderServiceSchema(), properties, this.broker::destination, 42);
    }

    /**
     * Starts the services side by side. An emitting service's relay is held back until it is killed: what it commits
     * meanwhile waits in its outbox, as if its process died between the commit and the publication.
     */
    private void startServices() {
        CompletableFuture.allOf(SERVICES.stream()
                        .map(service -> CompletableFuture.runAsync(
                                () -> startService(service, !service.emits().isEmpty())))
                        .toArray(CompletableFuture[]::new))
                .join();
    }

    private void startService(Service service, boolean holdRelay) {
        String binding = "spring.cloud.stream.bindings." + service.binding() + ".";
        String role = this.databases.name(service.database());
        List<String> properties = new ArrayList<>(this.broker.serviceProperties(service));
        properties.addAll(List.of(
                "idempotency.outbox.relay.enabled=" + !holdRelay,
                // Parked rows released or skipped from the operator console (infra/demo.sh --console); the management
                // port answers on the loopback interface only.
                "management.endpoint.outbox.access=unrestricted"));
        properties.addAll(List.of(
                "spring.datasource.url="
                        + this.databases
                                .url(role)
                                .replaceFirst("//[^/]+/", "//127.0.0.1:" + this.databaseLink.port() + "/"),
                // It migrates as its database's owner, and works as a role that may only read and write the tables.
                "spring.datasource.username=" + this.databases.appRole(service.database()),
                "spring.datasource.password=" + this.databases.appRole(service.database()),
                "spring.flyway.user=" + role,
                "spring.flyway.password=" + role,
                binding + "consumer.back-off-initial-interval=200",
                binding + "consumer.back-off-max-interval=1000",
                "billing.payment-provider.url=http://127.0.0.1:" + this.providerLink.port(),
                // The shop's payment provider runs on this machine, on plain http.
                "billing.payment-provider.plain-http-allowed=true",
                "server.port=" + this.ports.get(service.name()),
                "management.server.port=" + this.managementPorts.get(service.name())));
        ServiceProcess process = ServiceProcess.start(
                ServiceProcess.jar(this.settings.servicesDir(), service.name()),
                service.name(),
                properties,
                this.settings.logs().resolve(service.name() + ".log"));
        synchronized (this.processes) {
            this.processes.put(service.name(), process);
        }
    }

    private void awaitQuiet() throws Exception {
        long lastReport = 0;
        long now = System.nanoTime();
        long deadline = (this.outageEnds - now > 0 ? this.outageEnds : now)
                + Duration.ofMinutes(5).toNanos();
        while (true) {
            int queued = queued();
            Map<String, Integer> processed = new LinkedHashMap<>();
            boolean done = queued == 0;
            for (Service service : SERVICES) {
                int expected = expected(service);
                int count = processed(service.name());
                processed.put(service.name(), count);
                done &= count >= expected;
            }
            if (done) {
                // A copy may still be on its way from the broker: quiet means drained twice, a second apart.
                Thread.sleep(1_000);
                if (queued() == 0) {
                    say("quiet: every queue drained");
                    return;
                }
            }
            if (System.nanoTime() - lastReport > Duration.ofSeconds(2).toNanos()) {
                say("waiting: events processed %s; %d message(s) still queued", processed, queued);
                lastReport = System.nanoTime();
            }
            if (System.nanoTime() > deadline) {
                throw new TimeoutException(
                        "The services did not drain their queues within 5 minutes (of the end of an outage, if any)");
            }
            Thread.sleep(200);
        }
    }

    /** Waits up to two minutes, counted from the end of an outage when one is under way. */
    private void waitFor(BooleanSupplier condition, String what) throws Exception {
        long now = System.nanoTime();
        long deadline = (this.outageEnds - now > 0 ? this.outageEnds : now)
                + Duration.ofMinutes(2).toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new TimeoutException("Gave up waiting for " + what + " after two minutes");
            }
            Thread.sleep(100);
        }
    }

    private int queued() throws Exception {
        int queued = 0;
        for (Service service : SERVICES) {
            queued += this.broker.queued(service);
        }
        return queued;
    }

    /** Whether the services processed more events than that, all together; not known yet counts as no. */
    private boolean processedMoreThan(int processed) {
        try {
            return processed() > processed;
        } catch (RuntimeException ex) {
            return false;
        }
    }

    /** The events the services processed, all together. */
    private int processed() {
        return SERVICES.stream().mapToInt(service -> processed(service.name())).sum();
    }

    private int processed(String service) {
        return count(this.jdbc.get(service), "SELECT count(*) FROM processed_event");
    }

    /** The seconds from one time to another; none when there is none. */
    private static double seconds(@Nullable Timestamp from, @Nullable Timestamp to) {
        return from == null || to == null
                ? 0
                : Duration.between(from.toInstant(), to.toInstant()).toNanos() / 1e9;
    }

    private static int count(JdbcTemplate db, String sql) {
        Integer count = db.queryForObject(sql, Integer.class);
        return count != null ? count : 0;
    }

    private double meter(String service, String meter) {
        try {
            HttpResponse<String> response = this.http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.managementPorts.get(service)
                                    + "/actuator/metrics/" + meter))
                            .timeout(Duration.ofSeconds(5))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                return 0;
            }
            JsonNode measurements = json.readTree(response.body()).path("measurements");
            return measurements.isEmpty()
                    ? 0
                    : measurements.get(0).path("value").asDouble();
        } catch (IOException ex) {
            return 0;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return 0;
        }
    }

    /** Deletes the run's broker users (the demo's stay, as its databases do). */
    public void dropBrokerUsers() {
        this.broker.dropUsers();
    }

    private JdbcTemplate jdbc(String database) {
        return new JdbcTemplate(dataSource(
                database,
                this.settings.database().adminUser(),
                this.settings.database().adminPassword()));
    }

    private HikariDataSource dataSource(String database, String user, String password) {
        HikariDataSource dataSource = new HikariDataSource();
        dataSource.setJdbcUrl(this.databases.url(this.databases.name(database)));
        dataSource.setUsername(user);
        dataSource.setPassword(password);
        dataSource.setMaximumPoolSize(3);
        this.dataSources.add(dataSource);
        return dataSource;
    }

    /**
     * A port free now, below the ephemeral ports (from 32768 on Linux), and never handed out before by this process: a
     * port of the ephemeral range may be taken by an outgoing connection before the service binds it, and a port is
     * bound only once its service starts, so two picks in a row could otherwise find the same one free.
     */
    private static int freePort() {
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = ThreadLocalRandom.current().nextInt(20_000, 32_000);
            if (!HANDED_OUT.add(port)) {
                continue;
            }
            try (ServerSocket socket = new ServerSocket(port)) {
                return port;
            } catch (IOException taken) {
                // Taken: another one.
            }
        }
        throw new IllegalStateException("No free port between 20000 and 32000 after 200 tries");
    }

    private void say(String format, Object... args) {
        this.progress.accept("[%6.1fs] %s".formatted((System.nanoTime() - this.started) / 1e9, format.formatted(args)));
    }
}
