package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
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
 *       delivered).
 * </ul>
 *
 * <p>Spring Modulith's JDBC event publication registry with AMQP externalization would be the peer;
 * {@code spring-modulith-events-amqp} is not served by the Maven repository this project builds from, so it is not
 * measured here.
 */
public final class OutboxBenchmark {

    /** The scenarios, in the order they run. */
    public static final List<String> SCENARIOS =
            List.of("hot-key", "10-keys", "1000-keys", "refused", "two-relays", "latency");

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
                ? SCENARIOS
                : SCENARIOS.stream().filter(scenarios::contains).toList();
    }

    public void run(int events, double rate, Duration latencySpan) throws Exception {
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
            String target = switch (name) {
                case "hot-key" -> verdict(median(values), 2_000, false);
                case "latency p99" -> verdict(median(values), 25, true);
                default -> "";
            };
            this.out.printf(
                    "  %-28s %,10.2f %s [%,.2f-%,.2f]  %s%n",
                    name,
                    median(values),
                    latency ? "ms      " : "events/s",
                    values.stream().min(Double::compare).orElseThrow(),
                    values.stream().max(Double::compare).orElseThrow(),
                    target);
        });
        ratio(results, "refused", "1000-keys", "the refused key's cost: >= 0.90 x");
        ratio(results, "two-relays", "1000-keys", "two relays against one");
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
