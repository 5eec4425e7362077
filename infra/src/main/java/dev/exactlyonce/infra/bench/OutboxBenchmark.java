package dev.exactlyonce.infra.bench;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.Outbox;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * The outbox's relay on RabbitMQ and PostgreSQL, in rounds:
 *
 * <ol>
 *   <li>throughput: a backlog of {@code events} events in the outbox (1,000 keys), written without waking the relay,
 *       then one more with {@code Outbox.emit}, which wakes it: events per second from that commit until the last
 *       event arrived at a consumer of the exchange, each published with a publisher confirm;
 *   <li>latency: one event per transaction at {@code rate} per second for {@code seconds}, each timed from its commit
 *       to its arrival at that consumer (commit, relay woken up, read, published, confirmed, routed, delivered).
 * </ol>
 *
 * <p>Spring Modulith's JDBC event publication registry with AMQP externalization would be the peer;
 * {@code spring-modulith-events-amqp} is not served by the Maven repository this project builds from, so it is not
 * measured here.
 */
public final class OutboxBenchmark {

    private static final String EVENT = "bench.outbox.emitted.v1";

    private static final int TRANSACTION_SIZE = 500;

    private final PostgresServer postgres;

    private final Map<String, String> rabbit;

    private final PrintStream out;

    private final int rounds;

    private String exchange = "";

    public OutboxBenchmark(PostgresServer postgres, Map<String, String> rabbit, PrintStream out, int rounds) {
        this.postgres = postgres;
        this.rabbit = rabbit;
        this.out = out;
        this.rounds = rounds;
    }

    public void run(int events, double rate, Duration latencySpan) throws Exception {
        String run = Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffL);
        String database = "bench_outbox_" + run;
        this.exchange = "bench-outbox-" + run;
        String exchange = this.exchange;
        this.out.printf(
                "PostgreSQL %s, RabbitMQ %s:%s; a backlog of %,d events per throughput run (written in transactions"
                        + " of %d), %s at %,.0f/s for latency; %d round(s)%n",
                this.postgres, host(), port(), events, TRANSACTION_SIZE, latencySpan, rate, this.rounds);
        this.postgres.execute("CREATE DATABASE " + database);
        List<Double> throughputs = new ArrayList<>();
        List<Double> p50s = new ArrayList<>();
        List<Double> p99s = new ArrayList<>();
        try (HikariDataSource dataSource = this.postgres.dataSource(database, 2);
                Connection broker = connectionFactory().newConnection("bench-outbox");
                Channel channel = broker.createChannel()) {
            new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                    .execute(dataSource);
            channel.exchangeDeclare(exchange, "topic", false, true, null);
            String queue = channel.queueDeclare().getQueue();
            channel.queueBind(queue, exchange, "#");
            Arrivals arrivals = new Arrivals(channel);
            channel.basicConsume(queue, true, arrivals);
            JdbcTemplate jdbc = new JdbcTemplate(dataSource);
            try (ConfigurableApplicationContext context = start(database, exchange)) {
                Outbox outbox = context.getBean(Outbox.class);
                TransactionTemplate transactions = context.getBean(TransactionTemplate.class);
                this.out.println("warming up (not reported)");
                throughput(outbox, transactions, jdbc, arrivals, Math.min(events, 5_000));
                for (int round = 1; round <= this.rounds; round++) {
                    jdbc.execute("TRUNCATE outbox_event");
                    double perSecond = throughput(outbox, transactions, jdbc, arrivals, events);
                    Latencies latencies = latency(outbox, transactions, arrivals, rate, latencySpan);
                    this.out.printf(
                            "round %d: relay %,9.0f events/s; commit to consumer at %,.0f/s: p50 %.2f ms, p99 %.2f ms%n",
                            round, perSecond, rate, latencies.percentile(50), latencies.percentile(99));
                    throughputs.add(perSecond);
                    p50s.add(latencies.percentile(50));
                    p99s.add(latencies.percentile(99));
                }
            }
        } finally {
            this.postgres.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
        }
        this.out.printf("%nmedian [min-max] of %d round(s) (target)%n", this.rounds);
        report("relay throughput, events/s, with publisher confirms", throughputs, 5_000, false);
        report("commit to consumer p50, ms", p50s, Double.NaN, true);
        report("commit to consumer p99, ms", p99s, 50, true);
        this.out.println("peer (Spring Modulith, JDBC registry + AMQP externalization): not measured,"
                + " spring-modulith-events-amqp is not served here");
    }

    /**
     * Writes a backlog of events in transactions of 500 without waking the relay (the rows the outbox writes, inserted
     * directly), then wakes it with one more event and times it until every event arrived.
     */
    private double throughput(
            Outbox outbox, TransactionTemplate transactions, JdbcTemplate jdbc, Arrivals arrivals, int events)
            throws InterruptedException {
        arrivals.reset();
        for (int written = 0; written < events; written += TRANSACTION_SIZE) {
            int from = written;
            int to = Math.min(from + TRANSACTION_SIZE, events);
            transactions.executeWithoutResult(status -> jdbc.batchUpdate(
                    "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)"
                            + " VALUES (?, ?, ?, ?, ?::jsonb)",
                    IntStream.range(from, to).boxed().toList(),
                    TRANSACTION_SIZE,
                    (statement, n) -> {
                        statement.setObject(1, UuidV7.generate());
                        statement.setString(2, this.exchange);
                        statement.setString(3, "key-" + (n % 1_000));
                        statement.setString(4, EVENT);
                        statement.setString(5, "{\"n\": " + n + "}");
                    }));
        }
        long start = System.nanoTime();
        transactions.executeWithoutResult(status -> outbox.emit(EVENT, "key", Map.of("n", events)));
        arrivals.await(events + 1, Duration.ofMinutes(5));
        return (events + 1) / ((System.nanoTime() - start) / 1e9);
    }

    private Latencies latency(
            Outbox outbox, TransactionTemplate transactions, Arrivals arrivals, double rate, Duration span)
            throws InterruptedException {
        arrivals.reset();
        Latencies latencies = new Latencies();
        arrivals.timeWith(latencies);
        int events = (int) (rate * span.toSeconds());
        long interval = (long) (1e9 / rate);
        long next = System.nanoTime();
        for (int n = 0; n < events; n++) {
            LockSupport.parkNanos(next - System.nanoTime());
            transactions.executeWithoutResult(status -> {
                String[] id = new String[1];
                // Registered before the outbox's own, so it runs first: the commit is noted before the relay wakes.
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        arrivals.committed(id[0], System.nanoTime());
                    }
                });
                id[0] = outbox.emit(EVENT, "key", Map.of("n", 0)).toString();
            });
            next += interval;
        }
        arrivals.await(events, Duration.ofMinutes(2));
        arrivals.timeWith(null);
        return latencies;
    }

    private ConfigurableApplicationContext start(String database, String exchange) {
        List<String> properties = List.of(
                "spring.datasource.url=" + this.postgres.url(database),
                "spring.datasource.username=" + this.postgres.user(),
                "spring.datasource.password=" + this.postgres.password(),
                "spring.rabbitmq.host=" + host(),
                "spring.rabbitmq.port=" + port(),
                "spring.rabbitmq.username=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest"),
                "spring.rabbitmq.password=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest"),
                "idempotency.outbox.destination=" + exchange,
                "spring.cloud.stream.rabbit.bindings[" + exchange + "].producer.declare-exchange=false",
                "idempotency.purge.enabled=false",
                // Woken up by commits; the throughput runs write their backlog without waking it.
                "idempotency.outbox.relay.poll-interval=1h",
                // It binds no function: only the relay's output.
                "spring.cloud.stream.function.autodetect=false",
                "logging.level.root=WARN");
        return new SpringApplicationBuilder(OutboxBenchmarkApplication.class)
                .web(WebApplicationType.NONE)
                .bannerMode(Banner.Mode.OFF)
                .logStartupInfo(false)
                .run(properties.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private void report(String name, List<Double> values, double target, boolean atMost) {
        List<Double> sorted = values.stream().sorted().toList();
        double median = sorted.get(sorted.size() / 2);
        String verdict = Double.isNaN(target)
                ? ""
                : "(%s %,.0f: %s)"
                        .formatted(
                                atMost ? "<=" : ">=",
                                target,
                                (atMost ? median <= target : median >= target) ? "met" : "missed");
        this.out.printf(
                "  %-52s %,10.2f  [%,.2f-%,.2f]  %s%n",
                name, median, sorted.get(0), sorted.get(sorted.size() - 1), verdict);
    }

    private String host() {
        return this.rabbit.getOrDefault("SPRING_RABBITMQ_HOST", "localhost");
    }

    private String port() {
        return this.rabbit.getOrDefault("SPRING_RABBITMQ_PORT", "5672");
    }

    private ConnectionFactory connectionFactory() {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(host());
        factory.setPort(Integer.parseInt(port()));
        factory.setUsername(this.rabbit.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest"));
        factory.setPassword(this.rabbit.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest"));
        return factory;
    }

    /** Counts the events the consumer receives and, while latencies are taken, times each from its commit. */
    private static final class Arrivals extends DefaultConsumer {

        private final AtomicInteger received = new AtomicInteger();

        private final Map<String, Long> commits = new ConcurrentHashMap<>();

        private volatile Latencies latencies;

        Arrivals(Channel channel) {
            super(channel);
        }

        void reset() {
            this.received.set(0);
            this.commits.clear();
        }

        void timeWith(Latencies latencies) {
            this.latencies = latencies;
        }

        /** The event committed then: its arrival is timed from now. */
        void committed(String id, long at) {
            this.commits.put(id, at);
        }

        @Override
        public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
            long now = System.nanoTime();
            Latencies latencies = this.latencies;
            Long committed = properties.getMessageId() != null ? this.commits.remove(properties.getMessageId()) : null;
            if (latencies != null && committed != null) {
                latencies.add(now - committed);
            }
            this.received.incrementAndGet();
        }

        void await(int count, Duration limit) throws InterruptedException {
            long deadline = System.nanoTime() + limit.toNanos();
            while (this.received.get() < count) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(
                            "Only %d of %d events arrived within %s".formatted(this.received.get(), count, limit));
                }
                // The consumer counts on its own thread; the benchmark polls the count (2 ms: well below the figures).
                TimeUnit.MILLISECONDS.sleep(2);
            }
        }
    }
}
