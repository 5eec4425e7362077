package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.IntStream;
import org.springframework.boot.Banner;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The outbox's relay on PostgreSQL and RabbitMQ (or Kafka: {@link OutboxBroker}), in rounds; in each round, every
 * scenario in turn:
 *
 * <ul>
 *   <li>throughput ({@code hot-key}, {@code 10-keys}, {@code 1000-keys}): a backlog of {@code events} events in the
 *       outbox, of one key, 10 keys or 1,000 keys, written without waking the relay, then one more with
 *       {@code Outbox.emit}, which wakes it: events per second from that commit until the last event arrived at a
 *       consumer of the destination, each published once the broker confirmed (acknowledged) it;
 *   <li>{@code refused}: the 1,000 keys' backlog behind a key of 600 rows, written first, that the broker refuses
 *       (on RabbitMQ its exchange's only queue is full and rejects what it is given; on Kafka its topic takes no
 *       record that large): what the refused key costs the others;
 *   <li>{@code two-relays}: the 1,000 keys' backlog published by the relays of two instances at once;
 *   <li>{@code latency}: one event per transaction at {@code rate} per second for {@code seconds}, each timed from its
 *       commit to its arrival at that consumer (commit, relay woken up, read, published, confirmed, routed,
 *       delivered);
 *   <li>{@code held-xmin}, run only when named: {@value #HELD_RATE} events/s emitted (transactions of {@value
 *       #HELD_TRANSACTION}, over {@value #HELD_KEYS} keys) for a minute, then while a {@code REPEATABLE READ}
 *       transaction is held open for {@code hold} (a report, a replica's {@code hot_standby_feedback}, an idle logical
 *       slot: vacuum removes nothing written since it began), then until the backlog is back to what it was before:
 *       the events published per second before the hold and in its last minute, and how long the backlog took to come
 *       back after the release.
 * </ul>
 *
 * <p>Spring Modulith's JDBC event publication registry with AMQP externalization would be the peer;
 * {@code spring-modulith-events-amqp} is not served by the Maven repository this project builds from, so it is not
 * measured here.
 */
public final class OutboxBenchmark {

    /** The scenarios, in the order they run. */
    public static final List<String> SCENARIOS =
            List.of("hot-key", "10-keys", "1000-keys", "refused", "two-relays", "latency", "held-xmin");

    /** The scenarios run when none is named: all but the long one. */
    private static final List<String> DEFAULT_SCENARIOS =
            SCENARIOS.stream().filter(scenario -> !scenario.equals("held-xmin")).toList();

    private static final int HELD_RATE = 2_000;

    private static final int HELD_TRANSACTION = 20;

    private static final int HELD_KEYS = 100;

    private static final String EVENT = "bench.outbox.emitted.v1";

    private static final int TRANSACTION_SIZE = 500;

    private static final int REFUSED_ROWS = 600;

    private final PostgresServer postgres;

    private final OutboxBroker broker;

    private final PrintStream out;

    private final int rounds;

    private final List<String> scenarios;

    private String exchange = "";

    private String refusing = "";

    private String database = "";

    public OutboxBenchmark(
            PostgresServer postgres, OutboxBroker broker, PrintStream out, int rounds, List<String> scenarios) {
        this.postgres = postgres;
        this.broker = broker;
        this.out = out;
        this.rounds = rounds;
        List<String> unknown = scenarios.stream()
                .filter(scenario -> !SCENARIOS.contains(scenario))
                .toList();
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("Unknown scenario '%s'; the scenarios are %s."
                    .formatted(unknown.get(0), String.join(", ", SCENARIOS)));
        }
        this.scenarios = scenarios.isEmpty()
                ? DEFAULT_SCENARIOS
                : SCENARIOS.stream().filter(scenarios::contains).toList();
    }

    public void run(int events, double rate, Duration latencySpan, Duration hold) throws Exception {
        String run = Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffL);
        this.database = "bench_outbox_" + run;
        this.exchange = "bench-outbox-" + run;
        this.refusing = "bench-outbox-refusing-" + run;
        this.out.printf(
                "PostgreSQL %s, %s; a backlog of %,d events per throughput run (written in transactions"
                        + " of %d), %s at %,.0f/s for latency; %d round(s) of %s%n",
                this.postgres,
                this.broker.describe(),
                events,
                TRANSACTION_SIZE,
                latencySpan,
                rate,
                this.rounds,
                String.join(", ", this.scenarios));
        this.postgres.execute("CREATE DATABASE " + this.database);
        Map<String, List<Double>> results = new LinkedHashMap<>();
        try (HikariDataSource dataSource = this.postgres.dataSource(this.database, 2)) {
            new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                    .execute(dataSource);
            Arrivals arrivals = new Arrivals();
            this.broker.start(this.exchange, this.refusing, arrivals);
            JdbcTemplate jdbc = new JdbcTemplate(dataSource);
            try (ConfigurableApplicationContext context = start()) {
                Instance instance = new Instance(context);
                this.out.println("warming up (not reported)");
                throughput(List.of(instance), jdbc, arrivals, Math.min(events, 5_000), 1_000, false);
                for (int round = 1; round <= this.rounds; round++) {
                    StringBuilder line = new StringBuilder("round %d:".formatted(round));
                    for (String scenario : this.scenarios) {
                        jdbc.execute("TRUNCATE outbox_event");
                        String result = switch (scenario) {
                            case "latency" -> {
                                Latencies latencies = latency(instance, arrivals, rate, latencySpan);
                                results.computeIfAbsent("latency p50", key -> new ArrayList<>())
                                        .add(latencies.percentile(50));
                                results.computeIfAbsent("latency p99", key -> new ArrayList<>())
                                        .add(latencies.percentile(99));
                                yield "latency p50 %.2f ms, p99 %.2f ms"
                                        .formatted(latencies.percentile(50), latencies.percentile(99));
                            }
                            case "held-xmin" -> {
                                HeldXmin held = heldXmin(instance, dataSource, jdbc, arrivals, hold);
                                results.computeIfAbsent("held-xmin before", key -> new ArrayList<>())
                                        .add(held.before());
                                results.computeIfAbsent("held-xmin held", key -> new ArrayList<>())
                                        .add(held.held());
                                results.computeIfAbsent("held-xmin back after", key -> new ArrayList<>())
                                        .add(held.backAfter());
                                yield "held-xmin %,.0f/s before, %,.0f/s in the hold's last minute, backlog back %.1f s"
                                                .formatted(held.before(), held.held(), held.backAfter())
                                        + " after the release";
                            }
                            case "two-relays" -> {
                                try (ConfigurableApplicationContext second = start()) {
                                    double perSecond = throughput(
                                            List.of(instance, new Instance(second)),
                                            jdbc,
                                            arrivals,
                                            events,
                                            1_000,
                                            false);
                                    results.computeIfAbsent(scenario, key -> new ArrayList<>())
                                            .add(perSecond);
                                    yield "%s %,.0f/s".formatted(scenario, perSecond);
                                }
                            }
                            default -> {
                                double perSecond = throughput(
                                        List.of(instance),
                                        jdbc,
                                        arrivals,
                                        events,
                                        keys(scenario),
                                        scenario.equals("refused"));
                                results.computeIfAbsent(scenario, key -> new ArrayList<>())
                                        .add(perSecond);
                                yield "%s %,.0f/s".formatted(scenario, perSecond);
                            }
                        };
                        line.append(' ').append(result).append(';');
                    }
                    this.out.println(line);
                }
            }
        } finally {
            this.postgres.execute("DROP DATABASE IF EXISTS " + this.database + " WITH (FORCE)");
        }
        report(results);
    }

    private static int keys(String scenario) {
        return switch (scenario) {
            case "hot-key" -> 1;
            case "10-keys" -> 10;
            default -> 1_000;
        };
    }

    /**
     * Writes a backlog of events in transactions of 500 without waking the relays (the rows the outbox writes,
     * inserted directly), then wakes each relay with one more event and times it until every event arrived. With
     * {@code refused}, a key of 600 rows the broker refuses is written first.
     */
    private double throughput(
            List<Instance> instances, JdbcTemplate jdbc, Arrivals arrivals, int events, int keys, boolean refused)
            throws InterruptedException {
        arrivals.reset();
        if (refused) {
            insert(jdbc, this.refusing, 0, REFUSED_ROWS, n -> "refused");
        }
        for (int written = 0; written < events; written += TRANSACTION_SIZE) {
            insert(
                    jdbc,
                    this.exchange,
                    written,
                    Math.min(written + TRANSACTION_SIZE, events),
                    n -> "key-" + (n % keys));
        }
        long start = System.nanoTime();
        for (Instance instance : instances) {
            instance.transactions()
                    .executeWithoutResult(status -> instance.outbox().emit(EVENT, "key-0", Map.of("n", events)));
        }
        arrivals.await(events + instances.size(), Duration.ofMinutes(5));
        return (events + instances.size()) / ((System.nanoTime() - start) / 1e9);
    }

    private static void insert(
            JdbcTemplate jdbc, String destination, int from, int to, java.util.function.IntFunction<String> key) {
        jdbc.batchUpdate(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES (?, ?, ?, ?, ?::jsonb)",
                IntStream.range(from, to).boxed().toList(),
                TRANSACTION_SIZE,
                (statement, n) -> {
                    statement.setObject(1, UuidV7.generate());
                    statement.setString(2, destination);
                    statement.setString(3, key.apply(n));
                    statement.setString(4, EVENT);
                    statement.setString(5, "{\"n\": " + n + "}");
                });
    }

    private Latencies latency(Instance instance, Arrivals arrivals, double rate, Duration span)
            throws InterruptedException {
        arrivals.reset();
        Latencies latencies = new Latencies();
        arrivals.timeWith(latencies);
        int events = (int) (rate * span.toSeconds());
        long interval = (long) (1e9 / rate);
        long next = System.nanoTime();
        for (int n = 0; n < events; n++) {
            LockSupport.parkNanos(next - System.nanoTime());
            instance.transactions().executeWithoutResult(status -> {
                String[] id = new String[1];
                // Registered before the outbox's own, so it runs first: the commit is noted before the relay wakes.
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        arrivals.committed(id[0], System.nanoTime());
                    }
                });
                id[0] = instance.outbox().emit(EVENT, "key", Map.of("n", 0)).toString();
            });
            next += interval;
        }
        arrivals.await(events, Duration.ofMinutes(2));
        arrivals.timeWith(null);
        return latencies;
    }

    /**
     * Events emitted at {@value #HELD_RATE}/s for a minute, then while a {@code REPEATABLE READ} transaction (one that
     * read a row, so that it holds a snapshot) stays open for {@code hold}, then until the backlog (emitted, not
     * arrived) is back to the largest it was in the first minute, at most three times the hold: the events arrived
     * per second in the first minute and in the hold's last minute, and how long after the release the backlog was
     * back. Says where it is once a minute.
     */
    private HeldXmin heldXmin(
            Instance instance, HikariDataSource dataSource, JdbcTemplate jdbc, Arrivals arrivals, Duration hold)
            throws Exception {
        arrivals.reset();
        if (!"on".equals(jdbc.queryForObject("SHOW autovacuum", String.class))) {
            this.out.println("  held-xmin: autovacuum is off on this server, so nothing is vacuumed after the release"
                    + " either: turn it on (ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf()) for figures"
                    + " that mean something");
        }
        Duration minute = hold.compareTo(Duration.ofMinutes(1)) < 0 ? hold : Duration.ofMinutes(1);
        AtomicLong emitted = new AtomicLong();
        AtomicBoolean emitting = new AtomicBoolean(true);
        Thread writer = new Thread(() -> emitSteadily(instance, emitted, emitting), "bench-held-xmin-writer");
        writer.start();
        try {
            long backlogBefore = 0;
            int startArrived = arrivals.received();
            long start = System.nanoTime();
            while (System.nanoTime() - start < minute.toNanos()) {
                TimeUnit.MILLISECONDS.sleep(100);
                backlogBefore = Math.max(backlogBefore, emitted.get() - arrivals.received());
            }
            double before = (arrivals.received() - startArrived) / ((System.nanoTime() - start) / 1e9);
            double held;
            try (Connection snapshot = dataSource.getConnection()) {
                snapshot.setAutoCommit(false);
                snapshot.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
                try (Statement statement = snapshot.createStatement()) {
                    statement.execute("SELECT count(*) FROM outbox_event");
                }
                long holding = System.nanoTime();
                long end = holding + hold.toNanos();
                long lastMinute = end - minute.toNanos();
                int lastMinuteArrived = -1;
                Progress progress = new Progress(jdbc, emitted, arrivals, holding);
                while (System.nanoTime() < end) {
                    TimeUnit.MILLISECONDS.sleep(100);
                    if (lastMinuteArrived < 0 && System.nanoTime() >= lastMinute) {
                        lastMinuteArrived = arrivals.received();
                    }
                    progress.everyMinute("held");
                }
                held = (arrivals.received() - Math.max(0, lastMinuteArrived)) / (minute.toNanos() / 1e9);
                snapshot.rollback();
            }
            long released = System.nanoTime();
            Progress progress = new Progress(jdbc, emitted, arrivals, released);
            while (emitted.get() - arrivals.received() > backlogBefore) {
                progress.everyMinute("released");
                if (System.nanoTime() - released > 3 * hold.toNanos()) {
                    throw new IllegalStateException("The backlog (%,d events) was not back to %,d within %s of the"
                                    .formatted(emitted.get() - arrivals.received(), backlogBefore, hold.multipliedBy(3))
                            + " release");
                }
                TimeUnit.MILLISECONDS.sleep(100);
            }
            double backAfter = (System.nanoTime() - released) / 1e9;
            return new HeldXmin(before, held, backAfter);
        } finally {
            emitting.set(false);
            writer.join();
            arrivals.await((int) emitted.get(), Duration.ofMinutes(5));
        }
    }

    /** Says once a minute how the {@code held-xmin} scenario goes: the events published, the backlog, the table. */
    private final class Progress {

        private final JdbcTemplate jdbc;

        private final AtomicLong emitted;

        private final Arrivals arrivals;

        private final long since;

        private long reported;

        private int arrived;

        Progress(JdbcTemplate jdbc, AtomicLong emitted, Arrivals arrivals, long since) {
            this.jdbc = jdbc;
            this.emitted = emitted;
            this.arrivals = arrivals;
            this.since = since;
            this.reported = since;
            this.arrived = arrivals.received();
        }

        void everyMinute(String phase) {
            long now = System.nanoTime();
            if (now - this.reported < Duration.ofMinutes(1).toNanos()) {
                return;
            }
            int arrived = this.arrivals.received();
            OutboxBenchmark.this.out.printf(
                    "  held-xmin: %s %d s, %,.0f events/s published in the last minute, backlog %,d, outbox_event %s%n",
                    phase,
                    Duration.ofNanos(now - this.since).toSeconds(),
                    (arrived - this.arrived) / ((now - this.reported) / 1e9),
                    this.emitted.get() - arrived,
                    this.jdbc.queryForObject(
                            "SELECT pg_size_pretty(pg_total_relation_size('outbox_event'))", String.class));
            this.reported = now;
            this.arrived = arrived;
        }
    }

    /** Emits {@value #HELD_RATE} events a second, until told to stop; counts them once committed. */
    private static void emitSteadily(Instance instance, AtomicLong emitted, AtomicBoolean emitting) {
        long interval = 1_000_000_000L * HELD_TRANSACTION / HELD_RATE;
        long next = System.nanoTime();
        while (emitting.get()) {
            LockSupport.parkNanos(next - System.nanoTime());
            long first = emitted.get();
            instance.transactions().executeWithoutResult(status -> {
                for (int n = 0; n < HELD_TRANSACTION; n++) {
                    instance.outbox().emit(EVENT, "key-" + ((first + n) % HELD_KEYS), Map.of("n", first + n));
                }
            });
            emitted.addAndGet(HELD_TRANSACTION);
            next += interval;
        }
    }

    /**
     * The {@code held-xmin} scenario's figures.
     *
     * @param before events published per second before the hold
     * @param held events published per second in the hold's last minute
     * @param backAfter seconds from the release until the backlog was back to what it was before
     */
    private record HeldXmin(double before, double held, double backAfter) {}

    /** An instance of the emitting service: its outbox and its relay. */
    private record Instance(Outbox outbox, TransactionTemplate transactions) {

        Instance(ConfigurableApplicationContext context) {
            this(context.getBean(Outbox.class), context.getBean(TransactionTemplate.class));
        }
    }

    private ConfigurableApplicationContext start() {
        List<String> properties = new ArrayList<>(List.of(
                "spring.datasource.url=" + this.postgres.url(this.database),
                "spring.datasource.username=" + this.postgres.user(),
                "spring.datasource.password=" + this.postgres.password(),
                "idempotency.outbox.destination=" + this.exchange,
                "idempotency.purge.enabled=false",
                // Woken up by commits; the throughput runs write their backlog without waking it.
                "idempotency.outbox.relay.poll-interval=1h",
                // It binds no function: only the relay's output.
                "spring.cloud.stream.function.autodetect=false",
                "logging.level.root=WARN",
                // The refused key's WARN lines, one per attempt, are expected here.
                "logging.level.dev.exactlyonce.idempotency.outbox.OutboxRelay=ERROR"));
        properties.addAll(this.broker.properties(this.exchange, this.refusing));
        return new SpringApplicationBuilder(OutboxBenchmarkApplication.class)
                .web(WebApplicationType.NONE)
                .bannerMode(Banner.Mode.OFF)
                .logStartupInfo(false)
                .run(properties.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private void report(Map<String, List<Double>> results) {
        this.out.printf("%nmedian [min-max] of %d round(s) (target)%n", this.rounds);
        results.forEach((name, values) -> {
            boolean latency = name.startsWith("latency");
            boolean seconds = name.endsWith("back after");
            String target = switch (name) {
                case "hot-key" -> verdict(median(values), 2_000, false);
                case "latency p99" -> verdict(median(values), 25, true);
                default -> "";
            };
            this.out.printf(
                    "  %-28s %,10.2f %s [%,.2f-%,.2f]  %s%n",
                    name,
                    median(values),
                    latency ? "ms      " : seconds ? "s       " : "events/s",
                    values.stream().min(Double::compare).orElseThrow(),
                    values.stream().max(Double::compare).orElseThrow(),
                    target);
        });
        ratio(results, "refused", "1000-keys", "the refused key's cost: >= 0.90 x");
        ratio(results, "two-relays", "1000-keys", "two relays against one");
        ratio(results, "held-xmin held", "held-xmin before", "with a snapshot held: >= 0.90 x");
        this.out.println("peer (Spring Modulith, JDBC registry + AMQP externalization): not measured,"
                + " spring-modulith-events-amqp is not served here");
    }

    /** The median of the per-round ratios, paired round by round (the machine's noise hits both alike). */
    private void ratio(Map<String, List<Double>> results, String scenario, String base, String meaning) {
        List<Double> of = results.get(scenario);
        List<Double> to = results.get(base);
        if (of == null || to == null) {
            return;
        }
        List<Double> ratios = IntStream.range(0, of.size())
                .mapToObj(i -> of.get(i) / to.get(i))
                .toList();
        this.out.printf(
                "  %-28s %10.2f x [%.2f-%.2f]  (%s)%n",
                scenario + " / " + base,
                median(ratios),
                ratios.stream().min(Double::compare).orElseThrow(),
                ratios.stream().max(Double::compare).orElseThrow(),
                meaning);
    }

    private static double median(List<Double> values) {
        return values.stream().sorted().toList().get(values.size() / 2);
    }

    private static String verdict(double median, double target, boolean atMost) {
        return "(%s %,.0f: %s)"
                .formatted(
                        atMost ? "<=" : ">=",
                        target,
                        (atMost ? median <= target : median >= target) ? "met" : "missed");
    }
}
