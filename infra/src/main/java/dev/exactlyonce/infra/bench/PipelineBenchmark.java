package dev.exactlyonce.infra.bench;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.ProcessedEventStore;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.ToDoubleFunction;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.Banner;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.cloud.stream.binding.BindingsLifecycleController;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.io.ClassPathResource;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.InterceptableChannel;

/**
 * The full pipeline, RabbitMQ → binder → transaction → guard → handler → commit → ack, scenario by scenario in one
 * run: the same transactional handler without the guard, with it, with duplicates only, behind Spring Integration's
 * idempotent receiver, and in batches. For each it measures:
 *
 * <ol>
 *   <li>throughput: {@code messages} events (five times as many in batches and for the ceilings) published to the
 *       queue first, then consumed (two consumers, prefetch 100) until all are committed, timed from the first commit
 *       to the last;
 *   <li>latency: events published at the same rate for every scenario ({@code rate}, or half the scenario's
 *       throughput if lower) for {@code seconds}, each timed from its publication to the commit of its transaction
 *       (just before the ack).
 * </ol>
 *
 * <p>Every scenario runs once per round, in turn. The report gives each scenario's median run, and each ratio computed
 * within every round from that round's two runs (paired, so that the machine's noise during a round hits both), as
 * the median of the rounds' ratios with their minimum and maximum.
 */
public final class PipelineBenchmark {

    private static final String PUBLISHED_AT = "bench-published-at";

    /** Every effect's amount. */
    private static final BigDecimal AMOUNT = new BigDecimal("1.250");

    /** How many times more events a run of a scenario in batches, or of a ceiling, consumes. */
    private static final int FAST_RUNS = 5;

    /**
     * A scenario: what consumes the events, whether in batches, whether every event is a copy of a processed one,
     * and further properties of the service.
     */
    private record Scenario(
            String id,
            String name,
            @Nullable String definition,
            boolean batch,
            boolean duplicates,
            List<String> properties) {

        Scenario(String id, String name, @Nullable String definition, boolean batch, boolean duplicates) {
            this(id, name, definition, batch, duplicates, List.of());
        }

        /**
         * The events of one throughput run: {@link #FAST_RUNS} times {@code messages} for the scenarios in batches
         * and the ceilings, which consume ten to forty thousand events a second, so that theirs lasts seconds, as
         * the others' does, rather than one: the moment a run catches on these shared cores weighs less.
         */
        int events(int messages) {
            return this.batch || this == MESSAGE_CEILING ? messages * FAST_RUNS : messages;
        }
    }

    /**
     * A run's figures: events per second, latencies, and the CPU time per event (microseconds) of the machine (every
     * process on it: the broker, the database and this JVM) and of this JVM alone, over the throughput run.
     */
    private record Figures(
            Scenario scenario, double perSecond, double p50, double p99, double cpuMicros, double jvmMicros) {

        Figures(Scenario scenario, double perSecond, double p50, double p99, CpuTime.PerEvent cpu) {
            this(scenario, perSecond, p50, p99, cpu.machineMicros(), cpu.jvmMicros());
        }
    }

    private static final Scenario WITHOUT_GUARD = new Scenario(
            "without-guard", "without guard (same transactional handler)", "recordEffectWithoutGuard", false, false);

    private static final Scenario GUARD =
            new Scenario("guard", "with guard", "idempotencyGuard|recordEffect", false, false);

    /**
     * Without the guard, the handler running the guard's claim itself before the same insert: the guard's statements,
     * round trips included, in the same pipeline, without the library's Java around them.
     */
    private static final Scenario CLAIM_BY_HAND = new Scenario(
            "claim-by-hand", "without guard, the handler claiming itself", "recordEffectWithClaim", false, false);

    /** With the guard, the handler emitting one event through the outbox, published by the relay meanwhile. */
    private static final Scenario EMITS = new Scenario(
            "emit", "with guard, emitting an event (outbox)", "idempotencyGuard|recordEffectAndEmit", false, false);

    /**
     * The same without the relay (as with Debezium publishing the rows): what the outbox's write costs the
     * transaction alone, apart from the publication's work on the same cores.
     */
    private static final Scenario EMITS_WITHOUT_RELAY = new Scenario(
            "emit-without-relay",
            "with guard, writing an event to the outbox, relay off",
            "idempotencyGuard|recordEffectAndEmit",
            false,
            false,
            List.of("idempotency.outbox.relay.enabled=false"));

    private static final Scenario DUPLICATES = new Scenario(
            "duplicates", "duplicates only (guard discards all)", "idempotencyGuard|recordEffect", false, true);

    private static final Scenario PEER =
            new Scenario("peer", "peer: Spring Integration idempotent receiver", "recordEffectWithPeer", false, false);

    private static final Scenario BATCH = new Scenario(
            "batch", "batch mode, one event per call (default)", "idempotencyGuard|recordEffect", true, false);

    private static final Scenario BATCH_OF_LISTS = new Scenario(
            "batch-of-lists", "batch mode, a function of a list", "idempotencyGuard|recordEffects", true, false);

    private static final Scenario BATCH_DUPLICATES = new Scenario(
            "batch-duplicates", "batch mode, duplicates only", "idempotencyGuard|recordEffect", true, true);

    /** Batch mode as it was before batches were bounded in time: handed on only when full or after a 20 ms gap. */
    private static final Scenario BATCH_UNBOUNDED = new Scenario(
            "batch-unbounded",
            "batch mode, no bound on a batch's wait",
            "idempotencyGuard|recordEffects",
            true,
            false,
            List.of("idempotency.batch.max-wait=0", "receive-timeout=20"));

    private static final Scenario BATCH_CEILING =
            new Scenario("batch-ceiling", "ceiling: batches to a no-op, no database", "discardAll", true, false);

    private static final Scenario MESSAGE_CEILING =
            new Scenario("message-ceiling", "ceiling: messages to a no-op, no database", "discardOne", false, false);

    /**
     * The SQL alone, straight on JDBC with the same consumers and no broker, binder or library: one transaction per
     * event that inserts the effect, with and without the guard's claim before it (the library's statement).
     */
    private static final Scenario SQL_EFFECT =
            new Scenario("sql-effect", "SQL only (JDBC): the effect's insert", null, false, false);

    private static final Scenario SQL_CLAIM =
            new Scenario("sql-claim", "SQL only (JDBC): the claim, then the effect's insert", null, false, false);

    /**
     * Batch mode's SQL alone, on the same footing: one transaction per batch of {@link #SQL_BATCH_SIZE} events (a full
     * batch, as a backlog gives), whose claim is one statement (the library's own, {@link ProcessedEventStore}), then
     * the effects: an insert per event (the services' functions of one event), or one JDBC batch of them (a function
     * of a list).
     */
    private static final Scenario SQL_BATCH =
            new Scenario("sql-batch", "SQL only (JDBC), in batches: claim, an insert per event", null, true, false);

    private static final Scenario SQL_LIST =
            new Scenario("sql-list", "SQL only (JDBC), in batches: claim, a JDBC batch insert", null, true, false);

    /** The events of a batch in {@link #SQL_BATCH} and {@link #SQL_LIST}: the library's batch-size by default. */
    private static final int SQL_BATCH_SIZE = 100;

    private static final List<Scenario> SCENARIOS = List.of(
            WITHOUT_GUARD,
            GUARD,
            CLAIM_BY_HAND,
            EMITS,
            EMITS_WITHOUT_RELAY,
            DUPLICATES,
            PEER,
            BATCH,
            BATCH_OF_LISTS,
            BATCH_DUPLICATES,
            BATCH_UNBOUNDED,
            BATCH_CEILING,
            MESSAGE_CEILING,
            SQL_EFFECT,
            SQL_CLAIM,
            SQL_BATCH,
            SQL_LIST);

    private final BenchDatabase server;

    private final Map<String, String> rabbit;

    private PrintStream out;

    private final int concurrency;

    private final int ackEvery;

    private final double latencyRate;

    private final int prefetch;

    private final int rounds;

    private final List<Scenario> scenarios;

    private final EnvelopeCodec codec = new EnvelopeCodec();

    /**
     * A benchmark of the pipeline.
     *
     * @param concurrency consumers per binding
     * @param ackEvery messages per broker acknowledgement (the Rabbit binder's {@code batch-size}), each message still
     *     in a transaction of its own
     * @param latencyRate the events per second published while latency is measured: the same offered load for every
     *     scenario (half the scenario's throughput if that is lower)
     * @param prefetch unacknowledged messages each consumer may hold
     * @param rounds how many times every scenario runs, in turn; the median run of each is reported
     * @param scenarios the ids of the scenarios to run, all of them when empty
     * @throws IllegalArgumentException naming the scenarios, when an id is not one of them
     */
    public PipelineBenchmark(
            BenchDatabase server,
            Map<String, String> rabbit,
            PrintStream out,
            int concurrency,
            int ackEvery,
            double latencyRate,
            int prefetch,
            int rounds,
            List<String> scenarios) {
        this.server = server;
        this.rabbit = rabbit;
        this.out = out;
        this.concurrency = concurrency;
        this.ackEvery = ackEvery;
        this.latencyRate = latencyRate;
        this.prefetch = prefetch;
        this.rounds = rounds;
        this.scenarios = select(scenarios, server);
    }

    private static List<Scenario> select(List<String> ids, BenchDatabase server) {
        for (String id : ids) {
            if (server.unsupported().containsKey(id)) {
                throw new IllegalArgumentException("Scenario '%s' does not run on %s: %s."
                        .formatted(id, server.product(), server.unsupported().get(id)));
            }
        }
        List<String> known = SCENARIOS.stream().map(Scenario::id).toList();
        for (String id : ids) {
            if (!known.contains(id)) {
                throw new IllegalArgumentException(
                        "Unknown scenario '%s'; the scenarios are %s.".formatted(id, String.join(", ", known)));
            }
        }
        return ids.isEmpty()
                ? SCENARIOS.stream()
                        .filter(scenario -> !server.unsupported().containsKey(scenario.id()))
                        .toList()
                : SCENARIOS.stream()
                        .filter(scenario -> ids.contains(scenario.id()))
                        .toList();
    }

    public void run(int messages, Duration latencySpan) throws Exception {
        String run = Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffL);
        String database = "bench_pipeline_" + run;
        this.out.printf(
                "%s %s, RabbitMQ %s:%s; %,d events per throughput run (%d times as many in batches and for the"
                        + " ceilings), %s of paced events for latency;"
                        + " %d consumers, prefetch %d, an ack every %d message(s)%n",
                this.server.product(),
                this.server,
                this.rabbit.getOrDefault("SPRING_RABBITMQ_HOST", "localhost"),
                this.rabbit.getOrDefault("SPRING_RABBITMQ_PORT", "5672"),
                messages,
                FAST_RUNS,
                latencySpan,
                this.concurrency,
                this.prefetch,
                this.ackEvery);
        this.server.createDatabase(database);
        List<Figures> figures = new ArrayList<>();
        List<List<Figures>> rounds = new ArrayList<>();
        try (HikariDataSource dataSource = this.server.dataSource(database, 2);
                Connection connection = connectionFactory().newConnection("bench-publisher")) {
            new ResourceDatabasePopulator(this.server.schemaScripts().stream()
                            .map(ClassPathResource::new)
                            .toArray(ClassPathResource[]::new))
                    .execute(dataSource);
            JdbcTemplate jdbc = new JdbcTemplate(dataSource);
            jdbc.execute(this.server.effectTable());
            this.out.printf("warming up (every scenario, %,d events, not reported)%n", Math.min(messages, 5_000));
            PrintStream report = this.out;
            this.out = new PrintStream(PrintStream.nullOutputStream());
            for (Scenario scenario : this.scenarios) {
                this.server.emptyTables().forEach(jdbc::execute);
                run(scenario, database, run, connection, jdbc, Math.min(messages, 5_000), Duration.ofSeconds(2));
            }
            this.out = report;
            for (int round = 1; round <= this.rounds; round++) {
                this.out.printf("round %d of %d%n", round, this.rounds);
                List<Figures> thisRound = new ArrayList<>();
                for (Scenario scenario : this.scenarios) {
                    emptyAndSettle(jdbc);
                    thisRound.add(
                            run(scenario, database, run, connection, jdbc, scenario.events(messages), latencySpan));
                }
                rounds.add(thisRound);
            }
            for (int i = 0; i < this.scenarios.size(); i++) {
                int scenario = i;
                figures.add(
                        median(rounds.stream().map(round -> round.get(scenario)).toList()));
            }
        } finally {
            this.server.dropDatabase(database);
        }
        report(figures, rounds);
    }

    private Figures run(
            Scenario scenario,
            String database,
            String run,
            Connection broker,
            JdbcTemplate jdbc,
            int messages,
            Duration latencySpan)
            throws Exception {
        if (scenario.definition() == null) {
            return sqlOnly(scenario, database, messages);
        }
        String key = scenario.definition().replaceAll("[^A-Za-z]", "")
                + (scenario.batch() ? "batch" : "")
                + (scenario.duplicates() ? "dup" : "")
                + SCENARIOS.indexOf(scenario);
        String exchange = "bench." + run;
        String queue = "bench." + key + "." + run;
        String binding = scenario.definition().replace("|", "") + "-in-0";
        Completions completions = new Completions();
        if (scenario == EMITS) {
            // The emitted events reach a queue, as they would in a shop (a message routed nowhere comes back to the
            // publisher, with a log line); the queue keeps the newest only.
            try (Channel channel = broker.createChannel()) {
                channel.exchangeDeclare(exchange, "topic", true);
                channel.queueDeclare(queue + ".emitted", false, false, false, Map.of("x-max-length", 1));
                channel.queueBind(queue + ".emitted", exchange, PipelineBenchmarkApplication.EMITTED);
            }
        }
        try (ConfigurableApplicationContext context = start(scenario, database, exchange, queue, binding)) {
            context.getBean(binding, InterceptableChannel.class).addInterceptor(completions);
            List<EventEnvelope<?>> events = events(messages);
            if (scenario.duplicates()) {
                claim(jdbc, events);
            }
            try (Channel channel = broker.createChannel()) {
                channel.confirmSelect();
                for (EventEnvelope<?> event : events) {
                    publish(channel, exchange, event);
                }
                channel.waitForConfirmsOrDie(60_000);
            }
            completions.expect(messages);
            context.getBean(BindingsLifecycleController.class)
                    .changeState(binding, BindingsLifecycleController.State.STARTED);
            completions.await(messages, Duration.ofMinutes(5));
            double perSecond = completions.throughput();
            this.out.printf(
                    "  %-56s %,9.0f events/s, CPU %s µs/event",
                    scenario.name(), perSecond, micros(completions.cpu().machineMicros()));

            // Latency on the same footing for every scenario: the throughput run's rows (five times as many in
            // batches) gone, and the database's writes of them done, rather than competing with the paced events.
            emptyAndSettle(jdbc);
            double rate = Math.min(this.latencyRate, perSecond / 2);
            int paced = (int) (rate * latencySpan.toSeconds());
            List<EventEnvelope<?>> pacedEvents = events(paced);
            if (scenario.duplicates()) {
                claim(jdbc, pacedEvents);
            }
            completions.measureLatency();
            try (Channel channel = broker.createChannel()) {
                long interval = (long) (1e9 / rate);
                long next = System.nanoTime();
                for (EventEnvelope<?> event : pacedEvents) {
                    LockSupport.parkNanos(next - System.nanoTime());
                    publish(channel, exchange, event);
                    next += interval;
                }
            }
            completions.await(messages + paced, Duration.ofMinutes(5));
            Latencies latencies = completions.latencies;
            this.out.printf(
                    ", at %,.0f/s: p50 %.2f ms, p99 %.2f ms%n",
                    rate, latencies.percentile(50), latencies.percentile(99));
            return new Figures(
                    scenario, perSecond, latencies.percentile(50), latencies.percentile(99), completions.cpu());
        } finally {
            try (Channel channel = broker.createChannel()) {
                channel.queueDelete(queue);
                // The dead-letter queue the library gives a guarded binding.
                channel.queueDelete(queue + ".dlq");
                channel.queueDelete(queue + ".emitted");
                channel.exchangeDelete(exchange);
            }
        }
    }

    /**
     * Empties the tables, then {@link BenchDatabase#settle}s where the benchmark's user may (a checkpoint takes a
     * superuser, or pg_checkpoint): a run then pays for none of the writes of the one before.
     */
    private void emptyAndSettle(JdbcTemplate jdbc) {
        this.server.emptyTables().forEach(jdbc::execute);
        for (String statement : this.server.settle()) {
            try {
                jdbc.execute(statement);
            } catch (DataAccessException ex) {
                // Not this user's to run: the latency run follows the throughput run's writes as it did before.
            }
        }
    }

    /**
     * The SQL of a scenario without anything around it: {@code concurrency} threads, each on a connection of its own,
     * one transaction per event, or per batch. Latency is not measured.
     */
    private Figures sqlOnly(Scenario scenario, String database, int messages) throws Exception {
        int perThread = messages / this.concurrency;
        ExecutorService threads = Executors.newFixedThreadPool(this.concurrency);
        List<java.sql.Connection> connections = new ArrayList<>();
        try (HikariDataSource dataSource = this.server.dataSource(database, this.concurrency)) {
            try {
                // Connected before the clock starts, as the pipeline's consumers are before their first commit.
                for (int thread = 0; thread < this.concurrency; thread++) {
                    connections.add(dataSource.getConnection());
                }
                return sqlOnly(scenario, connections, perThread, threads);
            } finally {
                for (java.sql.Connection connection : connections) {
                    connection.close();
                }
            }
        } finally {
            threads.shutdown();
        }
    }

    /** Each connection on a thread of its own, {@code perThread} events each, timed together. */
    private Figures sqlOnly(
            Scenario scenario, List<java.sql.Connection> connections, int perThread, ExecutorService threads) {
        List<CompletableFuture<Void>> running = new ArrayList<>();
        CpuTime cpuAtStart = CpuTime.now();
        long start = System.nanoTime();
        for (java.sql.Connection connection : connections) {
            running.add(CompletableFuture.runAsync(
                    () -> {
                        try {
                            connection.setAutoCommit(false);
                            if (scenario.batch()) {
                                sqlOfBatches(scenario, connection, perThread);
                            } else {
                                sqlOfMessages(scenario, connection, perThread);
                            }
                        } catch (SQLException ex) {
                            throw new IllegalStateException(ex);
                        }
                    },
                    threads));
        }
        CompletableFuture.allOf(running.toArray(CompletableFuture[]::new)).join();
        int events = perThread * connections.size();
        double perSecond = events / ((System.nanoTime() - start) / 1e9);
        CpuTime.PerEvent cpu = cpuAtStart.perEvent(CpuTime.now(), events);
        this.out.printf(
                "  %-56s %,9.0f events/s, CPU %s µs/event%n", scenario.name(), perSecond, micros(cpu.machineMicros()));
        return new Figures(scenario, perSecond, Double.NaN, Double.NaN, cpu);
    }

    /**
     * One transaction per event: the effect's insert, after the claim ({@link #SQL_CLAIM}). The effect's id is random,
     * as the pipeline's events carry it (its inserts land anywhere in the table's key), apart from the event's id.
     */
    private void sqlOfMessages(Scenario scenario, java.sql.Connection connection, int events) throws SQLException {
        try (PreparedStatement claim = connection.prepareStatement(this.server.claim());
                PreparedStatement effect = connection.prepareStatement(PipelineBenchmarkApplication.INSERT)) {
            for (int i = 0; i < events; i++) {
                UUID eventId = UuidV7.generate();
                if (scenario == SQL_CLAIM) {
                    this.server.claim(claim, eventId, PipelineBenchmarkApplication.EVENT);
                }
                effect.setObject(1, UUID.randomUUID());
                effect.setBigDecimal(2, AMOUNT);
                effect.executeUpdate();
                connection.commit();
            }
        }
    }

    /**
     * One transaction per batch: the batch's claim, then an insert per event, or a JDBC batch ({@link #SQL_LIST}), of
     * random effect ids as in {@link #sqlOfMessages}.
     */
    private static void sqlOfBatches(Scenario scenario, java.sql.Connection connection, int events)
            throws SQLException {
        ProcessedEventStore claims = Dialect.of(connection.getMetaData())
                .processedEvents(new JdbcTemplate(new SingleConnectionDataSource(connection, true)), "processed_event");
        try (PreparedStatement effect = connection.prepareStatement(PipelineBenchmarkApplication.INSERT)) {
            for (int first = 0; first < events; first += SQL_BATCH_SIZE) {
                List<ProcessedEventStore.Key> batch = new ArrayList<>(SQL_BATCH_SIZE);
                for (int i = first; i < Math.min(events, first + SQL_BATCH_SIZE); i++) {
                    batch.add(new ProcessedEventStore.Key(UuidV7.generate(), PipelineBenchmarkApplication.EVENT));
                }
                claims.claimAll(batch, "");
                for (int i = 0; i < batch.size(); i++) {
                    effect.setObject(1, UUID.randomUUID());
                    effect.setBigDecimal(2, AMOUNT);
                    if (scenario == SQL_LIST) {
                        effect.addBatch();
                    } else {
                        effect.executeUpdate();
                    }
                }
                if (scenario == SQL_LIST) {
                    effect.executeBatch();
                }
                connection.commit();
            }
        }
    }

    private ConfigurableApplicationContext start(
            Scenario scenario, String database, String exchange, String queue, String binding) {
        String bindings = "spring.cloud.stream.bindings." + binding + ".";
        String rabbitBindings = "spring.cloud.stream.rabbit.bindings." + binding + ".consumer.";
        List<String> properties = new ArrayList<>(List.of(
                "spring.datasource.url=" + this.server.url(database),
                "spring.datasource.username=" + this.server.user(),
                "spring.datasource.password=" + this.server.password(),
                "spring.datasource.hikari.maximum-pool-size=" + (this.concurrency + 2),
                "spring.rabbitmq.host=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_HOST", "localhost"),
                "spring.rabbitmq.port=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_PORT", "5672"),
                "spring.rabbitmq.username=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest"),
                "spring.rabbitmq.password=" + this.rabbit.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest"),
                "spring.cloud.function.definition=" + scenario.definition(),
                // The infra jar carries the Kafka binder too (bench-outbox --broker kafka).
                "spring.cloud.stream.default-binder=rabbit",
                bindings + "destination=" + exchange,
                bindings + "group=" + queue,
                bindings + "consumer.concurrency=" + this.concurrency,
                bindings + "consumer.auto-startup=false",
                bindings + "consumer.use-native-decoding=true",
                rabbitBindings + "queue-name-group-only=true",
                rabbitBindings + "binding-routing-key=" + PipelineBenchmarkApplication.EVENT,
                rabbitBindings + "prefetch=" + (scenario.batch() ? 200 : this.prefetch),
                "idempotency.purge.enabled=false",
                // The outbox's events go to the run's exchange, which routes them nowhere (no queue is bound).
                "idempotency.outbox.destination=" + exchange,
                "logging.level.root=WARN",
                "logging.level.dev.exactlyonce.idempotency.guard.IdempotencyGuard=ERROR"));
        if (scenario.batch()) {
            // A guarded binding gets the library's batch defaults (enable-batching, batches of up to 100, a batch
            // handed on within idempotency.batch.max-wait); the ceiling, unguarded, gets the same settings.
            properties.add(bindings + "consumer.batch-mode=true");
            if (!scenario.definition().startsWith("idempotencyGuard")) {
                properties.add(rabbitBindings + "enable-batching=true");
                properties.add(rabbitBindings + "batch-size=100");
                properties.add(rabbitBindings + "receive-timeout=10");
            }
        } else if (this.ackEvery > 1) {
            properties.add(rabbitBindings + "batch-size=" + this.ackEvery);
            properties.add(rabbitBindings + "receive-timeout=20");
        }
        for (String property : scenario.properties()) {
            properties.add(property.startsWith("idempotency.") ? property : rabbitBindings + property);
        }
        return new SpringApplicationBuilder(PipelineBenchmarkApplication.class)
                .web(WebApplicationType.NONE)
                .bannerMode(Banner.Mode.OFF)
                .logStartupInfo(false)
                .run(properties.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    private List<EventEnvelope<?>> events(int count) {
        List<EventEnvelope<?>> events = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            events.add(new EventEnvelope<>(
                    UuidV7.generate(),
                    PipelineBenchmarkApplication.EVENT,
                    Instant.now(),
                    new PipelineBenchmarkApplication.Effect(UUID.randomUUID(), AMOUNT)));
        }
        return events;
    }

    private static void claim(JdbcTemplate jdbc, List<EventEnvelope<?>> events) {
        jdbc.batchUpdate(
                "INSERT INTO processed_event (event_id, event_name) VALUES (?, ?)",
                events,
                1_000,
                (statement, event) -> {
                    statement.setObject(1, event.eventId());
                    statement.setString(2, event.eventName());
                });
    }

    private void publish(Channel channel, String exchange, EventEnvelope<?> event) throws Exception {
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .messageId(event.eventId().toString())
                .deliveryMode(2)
                .headers(Map.of(PUBLISHED_AT, System.nanoTime()))
                .build();
        channel.basicPublish(exchange, event.eventName(), properties, this.codec.encode(event));
    }

    private ConnectionFactory connectionFactory() {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(this.rabbit.getOrDefault("SPRING_RABBITMQ_HOST", "localhost"));
        factory.setPort(Integer.parseInt(this.rabbit.getOrDefault("SPRING_RABBITMQ_PORT", "5672")));
        factory.setUsername(this.rabbit.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest"));
        factory.setPassword(this.rabbit.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest"));
        return factory;
    }

    /** The run of median throughput, its latencies with it. */
    /** A latency as the report prints it: {@code -} where it was not measured. */
    private static String milliseconds(double value) {
        return Double.isNaN(value) ? "-" : "%.2f".formatted(value);
    }

    private static String micros(double value) {
        return Double.isNaN(value) ? "-" : "%.0f".formatted(value);
    }

    private static double medianOf(List<List<Figures>> rounds, Scenario scenario, ToDoubleFunction<Figures> figure) {
        List<Double> values = rounds.stream()
                .flatMap(List::stream)
                .filter(row -> row.scenario() == scenario)
                .map(figure::applyAsDouble)
                .sorted()
                .toList();
        return values.get(values.size() / 2);
    }

    private static Figures median(List<Figures> runs) {
        List<Figures> sorted = new ArrayList<>(runs);
        sorted.sort(Comparator.comparingDouble(Figures::perSecond));
        return sorted.get(sorted.size() / 2);
    }

    private void report(List<Figures> figures, List<List<Figures>> rounds) {
        this.out.printf(
                "%nmedian of %d round(s), each scenario run in turn in every round (events/s and latencies: the median"
                        + " run's; CPU, each its own median: microseconds per event of the machine, every process on"
                        + " it, and of this JVM)%n%-56s %12s %9s %9s %9s %9s%n",
                this.rounds, "scenario", "events/s", "p50 ms", "p99 ms", "CPU µs", "JVM µs");
        for (Figures row : figures) {
            this.out.printf(
                    "%-56s %,12.0f %9s %9s %9s %9s%n",
                    row.scenario().name(),
                    row.perSecond(),
                    milliseconds(row.p50()),
                    milliseconds(row.p99()),
                    micros(medianOf(rounds, row.scenario(), Figures::cpuMicros)),
                    micros(medianOf(rounds, row.scenario(), Figures::jvmMicros)));
        }
        List<Map<Scenario, Figures>> byRound = rounds.stream()
                .map(round -> {
                    Map<Scenario, Figures> by = new HashMap<>();
                    round.forEach(row -> by.put(row.scenario(), row));
                    return by;
                })
                .toList();
        this.out.printf(
                "%nratios, each computed within a round (paired): median [min-max over %d round(s)] (target)%n",
                this.rounds);
        for (Ratio ratio : RATIOS) {
            if (!this.scenarios.containsAll(List.of(ratio.a(), ratio.b()))) {
                continue;
            }
            if (ratio.name().startsWith("batch mode / batch ceiling")) {
                this.out.printf("what the broker and the binder leave, on the same cores (no database at all):%n");
            }
            printRatio(ratio, byRound.stream().map(ratio::value).toList());
        }
        List<Prediction> predictions = PREDICTIONS.stream()
                .filter(prediction -> this.scenarios.containsAll(prediction.scenarios()))
                .toList();
        if (!predictions.isEmpty()) {
            this.out.printf("what the SQL alone predicts (on JDBC, nothing around it), and what is left beyond it:%n");
        }
        for (Prediction prediction : predictions) {
            // Times per event: seconds per event, the inverse of events per second.
            printPrediction(prediction, byRound, row -> 1 / row.perSecond(), false);
        }
        reportCpu(byRound);
    }

    private void printRatio(Ratio ratio, List<Double> byRound) {
        List<Double> values = byRound.stream().sorted().toList();
        double median = values.get(values.size() / 2);
        String verdict = "";
        if (!Double.isNaN(ratio.target())) {
            boolean met = ratio.atMost() ? median <= ratio.target() : median >= ratio.target();
            verdict = "(%s %.2f x: %s)".formatted(ratio.atMost() ? "<=" : ">=", ratio.target(), met ? "met" : "missed");
        }
        this.out.printf(
                "  %-56s %6.2f x  [%.2f-%.2f]  %s%n",
                ratio.name(), median, values.get(0), values.get(values.size() - 1), verdict);
    }

    /**
     * The same ratios in events per CPU second: the machine's CPU time per event, which the disk's flushes and the
     * other tenants of the cores do not move as they move events per second (a scenario as fast as the CPU allows
     * would run at these ratios). Then each {@link Prediction} in CPU, and the guard's JVM CPU beyond the handler's.
     */
    private void reportCpu(List<Map<Scenario, Figures>> byRound) {
        if (byRound.stream().flatMap(round -> round.values().stream()).anyMatch(row -> Double.isNaN(row.cpuMicros()))) {
            this.out.printf("%n(no CPU time per event for some run: no /proc/stat to read, or a run too short)%n");
            return;
        }
        this.out.printf(
                "%nthe same ratios in events per CPU second (the machine's CPU time per event, every process on it:"
                        + " keep it otherwise idle), paired; the targets are the events per second's above:%n");
        for (Ratio ratio : RATIOS) {
            if (!ratio.p99() && this.scenarios.containsAll(List.of(ratio.a(), ratio.b()))) {
                List<Double> values = byRound.stream().map(ratio::cpuValue).toList();
                printRatio(Ratio.atLeast(ratio.name(), ratio.a(), ratio.b(), Double.NaN), values);
            }
        }
        for (Prediction prediction : PREDICTIONS) {
            if (this.scenarios.containsAll(prediction.scenarios())) {
                printPrediction(prediction, byRound, Figures::cpuMicros, true);
            }
        }
        if (this.scenarios.containsAll(List.of(WITHOUT_GUARD, GUARD))) {
            printMedian(
                    "the guard's JVM CPU beyond the handler's, µs per event",
                    differences(byRound, GUARD, WITHOUT_GUARD, Figures::jvmMicros),
                    "µs",
                    "");
        }
        if (this.scenarios.containsAll(List.of(CLAIM_BY_HAND, GUARD))) {
            // The same statements on both sides: what is left is the library's Java.
            printMedian(
                    "the guard's CPU beyond the handler claiming itself, µs",
                    differences(byRound, GUARD, CLAIM_BY_HAND, Figures::cpuMicros),
                    "µs",
                    "");
            printMedian(
                    "of it, the JVM's, µs per event",
                    differences(byRound, GUARD, CLAIM_BY_HAND, Figures::jvmMicros),
                    "µs",
                    "");
        }
    }

    /** A figure of {@code a} less the same of {@code b}, round by round. */
    private static List<Double> differences(
            List<Map<Scenario, Figures>> byRound, Scenario a, Scenario b, ToDoubleFunction<Figures> figure) {
        return byRound.stream()
                .map(round -> figure.applyAsDouble(round.get(a)) - figure.applyAsDouble(round.get(b)))
                .toList();
    }

    /**
     * A prediction's rows: the ratio its SQL alone predicts, the measured ratio's difference from it (with the target's
     * verdict, for events per second), and, in CPU, what the scenario costs per event beyond its reference and its SQL.
     */
    private void printPrediction(
            Prediction prediction,
            List<Map<Scenario, Figures>> byRound,
            ToDoubleFunction<Figures> perEvent,
            boolean cpu) {
        List<Double> fromSql = new ArrayList<>();
        List<Double> differences = new ArrayList<>();
        List<Double> beyondSql = new ArrayList<>();
        for (Map<Scenario, Figures> round : byRound) {
            double predicted = prediction.fromSql(round, perEvent);
            fromSql.add(predicted);
            differences.add(prediction.measured(round, perEvent) - predicted);
            beyondSql.add(perEvent.applyAsDouble(round.get(prediction.measured()))
                    - perEvent.applyAsDouble(round.get(prediction.base()))
                    - prediction.sql(round, perEvent));
        }
        printMedian(prediction.name() + ", from SQL alone", fromSql, "x", "");
        double difference = middle(differences);
        String verdict = cpu || Double.isNaN(prediction.within())
                ? "(%s)".formatted(prediction.cost())
                : "(%s; within %.2f: %s)"
                        .formatted(
                                prediction.cost(),
                                prediction.within(),
                                difference >= -prediction.within() ? "met" : "missed");
        printMedian(prediction.name() + ", measured - SQL's", differences, " ", verdict);
        if (cpu) {
            printMedian(prediction.subject() + ": CPU beyond SQL, µs/event", beyondSql, "µs", "");
        }
    }

    private void printMedian(String name, List<Double> values, String unit, String verdict) {
        List<Double> sorted = values.stream().sorted().toList();
        String format = switch (unit) {
            case " " -> "  %-56s %+6.2f %s  [%+.2f, %+.2f]  %s%n";
            case "µs" -> "  %-56s %+6.0f %s  [%+.0f, %+.0f]  %s%n";
            default -> "  %-56s %6.2f %s  [%.2f-%.2f]  %s%n";
        };
        this.out.printf(format, name, middle(sorted), unit, sorted.get(0), sorted.get(sorted.size() - 1), verdict);
    }

    private static double middle(List<Double> values) {
        return values.stream().sorted().toList().get(values.size() / 2);
    }

    /**
     * What a scenario would reach if all it adds to a reference scenario ({@code base}) were its SQL, run on JDBC with
     * nothing around it: the reference's time per event (or CPU per event), plus the SQL's ({@code withSql}'s, less
     * {@code withoutSql}'s, the part the reference already runs, where there is one). Measured against it, what is
     * left is the cost of the Java around the SQL: the library's, and the business function's own.
     *
     * @param subject what the scenario runs, for the report
     * @param cost what the difference is the cost of, for the report
     * @param within how close to the prediction the measured ratio is to be ({@code NaN}: no target)
     */
    private record Prediction(
            String name,
            Scenario measured,
            Scenario base,
            Scenario withSql,
            @Nullable Scenario withoutSql,
            String subject,
            String cost,
            double within) {

        List<Scenario> scenarios() {
            return this.withoutSql == null
                    ? List.of(this.measured, this.base, this.withSql)
                    : List.of(this.measured, this.base, this.withSql, this.withoutSql);
        }

        /** The SQL's time (or CPU) per event, in the round. */
        double sql(Map<Scenario, Figures> round, ToDoubleFunction<Figures> perEvent) {
            double with = perEvent.applyAsDouble(round.get(this.withSql));
            return this.withoutSql == null ? with : with - perEvent.applyAsDouble(round.get(this.withoutSql));
        }

        /** The ratio measured / base: the base's time (or CPU) per event over the measured scenario's. */
        double measured(Map<Scenario, Figures> round, ToDoubleFunction<Figures> perEvent) {
            return perEvent.applyAsDouble(round.get(this.base)) / perEvent.applyAsDouble(round.get(this.measured));
        }

        /** The ratio measured / base as the SQL alone predicts it: the base's time per event over the sum. */
        double fromSql(Map<Scenario, Figures> round, ToDoubleFunction<Figures> perEvent) {
            double base = perEvent.applyAsDouble(round.get(this.base));
            return base / (base + sql(round, perEvent));
        }
    }

    private static final List<Prediction> PREDICTIONS = List.of(
            new Prediction(
                    "with guard / without guard",
                    GUARD,
                    WITHOUT_GUARD,
                    SQL_CLAIM,
                    SQL_EFFECT,
                    "the guard",
                    "the library's own cost",
                    0.03),
            new Prediction(
                    "batch mode / batch ceiling",
                    BATCH,
                    BATCH_CEILING,
                    SQL_BATCH,
                    null,
                    "batch mode, one event per call",
                    "the Java around the SQL: the library's and the function's",
                    Double.NaN),
            new Prediction(
                    "a function of a list / batch ceiling",
                    BATCH_OF_LISTS,
                    BATCH_CEILING,
                    SQL_LIST,
                    null,
                    "a function of a list",
                    "the Java around the SQL: the library's and the function's",
                    Double.NaN));

    /**
     * A ratio between two scenarios of the same round, and its target ({@code NaN}: none).
     *
     * @param p99 whether it compares their p99 latencies rather than their throughputs
     * @param atMost whether the target is a ceiling (latencies) rather than a floor
     */
    private record Ratio(String name, Scenario a, Scenario b, boolean p99, double target, boolean atMost) {

        static Ratio atLeast(String name, Scenario a, Scenario b, double target) {
            return new Ratio(name, a, b, false, target, false);
        }

        /** The ratio in events per CPU second: the CPU time per event of {@code b}, over that of {@code a}. */
        double cpuValue(Map<Scenario, Figures> round) {
            return round.get(this.b).cpuMicros() / round.get(this.a).cpuMicros();
        }

        double value(Map<Scenario, Figures> round) {
            return this.p99
                    ? round.get(this.a).p99() / round.get(this.b).p99()
                    : round.get(this.a).perSecond() / round.get(this.b).perSecond();
        }
    }

    private static final List<Ratio> RATIOS = List.of(
            Ratio.atLeast("with guard / without guard", GUARD, WITHOUT_GUARD, 0.90),
            Ratio.atLeast("with guard / the handler claiming itself", GUARD, CLAIM_BY_HAND, Double.NaN),
            Ratio.atLeast("writing an event to the outbox, relay off / with guard", EMITS_WITHOUT_RELAY, GUARD, 0.85),
            Ratio.atLeast("emitting an event, relay publishing / with guard", EMITS, GUARD, Double.NaN),
            Ratio.atLeast("duplicates discarded / processing (with guard)", DUPLICATES, GUARD, 3),
            Ratio.atLeast("with guard / peer", GUARD, PEER, 1.0),
            Ratio.atLeast("batch mode / single-message mode, events/s", BATCH, GUARD, 5),
            new Ratio("batch mode / single-message mode, p99 at the same rate", BATCH, GUARD, true, 2, true),
            Ratio.atLeast("a function of a list / one event per call", BATCH_OF_LISTS, BATCH, Double.NaN),
            Ratio.atLeast("batch mode / batch mode without a bound on its wait", BATCH_OF_LISTS, BATCH_UNBOUNDED, 0.90),
            Ratio.atLeast("batch mode: duplicates only / processing", BATCH_DUPLICATES, BATCH, Double.NaN),
            Ratio.atLeast("batch mode / batch ceiling", BATCH, BATCH_CEILING, 0.55),
            Ratio.atLeast("a function of a list / batch ceiling", BATCH_OF_LISTS, BATCH_CEILING, 0.75),
            Ratio.atLeast("with guard / message ceiling", GUARD, MESSAGE_CEILING, Double.NaN),
            Ratio.atLeast("duplicates only / message ceiling", DUPLICATES, MESSAGE_CEILING, Double.NaN),
            Ratio.atLeast("SQL only: with the claim / without (the guard's SQL)", SQL_CLAIM, SQL_EFFECT, Double.NaN));

    /** Counts committed events on the binding's channel and, once asked, times them from their publication. */
    private static final class Completions implements ChannelInterceptor {

        private final AtomicInteger committed = new AtomicInteger();

        /** When the first commit came ({@link System#nanoTime()}), and how many events it committed. */
        private final AtomicLong firstCommit = new AtomicLong();

        private volatile int committedByTheFirst;

        private volatile long lastCommit;

        private final AtomicBoolean measuring = new AtomicBoolean();

        /** The events of the throughput run, once known; the CPU time is read at the first commit and at the last. */
        private volatile int expected = Integer.MAX_VALUE;

        private volatile @Nullable CpuTime cpuAtFirst;

        private volatile @Nullable CpuTime cpuAtLast;

        private volatile int committedByTheLast;

        private final Latencies latencies = new Latencies();

        void measureLatency() {
            this.measuring.set(true);
        }

        void expect(int events) {
            this.expected = events;
            if (this.committed.get() >= events) {
                lastOfTheRun(this.committed.get());
            }
        }

        /** The CPU time per event from the first commit to the last of the run. */
        CpuTime.PerEvent cpu() {
            CpuTime first = this.cpuAtFirst;
            CpuTime last = this.cpuAtLast;
            return first == null || last == null
                    ? CpuTime.PerEvent.UNKNOWN
                    : first.perEvent(last, this.committedByTheLast - this.committedByTheFirst);
        }

        /** Reads the CPU time at the run's last commit; what {@link #await} waits for is written last. */
        private synchronized void lastOfTheRun(int total) {
            if (this.cpuAtLast == null) {
                this.committedByTheLast = total;
                this.cpuAtLast = CpuTime.now();
            }
        }

        /**
         * Events per second from the first commit to the last: the binding's consumers starting is left out, which
         * would weigh on a run of a second or so (the ceilings') far more than on one of ten.
         */
        double throughput() {
            return (this.committed.get() - this.committedByTheFirst)
                    / ((this.lastCommit - this.firstCommit.get()) / 1e9);
        }

        /** Waits for that many commits (and, for the throughput run's, for the CPU time read at its last). */
        void await(int count, Duration limit) throws InterruptedException {
            long deadline = System.nanoTime() + limit.toNanos();
            while (this.committed.get() < count || (count == this.expected && this.cpuAtLast == null)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("Only %d of %d events were committed within %s"
                            .formatted(this.committed.get(), count, limit));
                }
                TimeUnit.MILLISECONDS.sleep(5);
            }
        }

        @Override
        public void afterSendCompletion(
                Message<?> message, MessageChannel channel, boolean sent, @Nullable Exception failure) {
            if (failure != null) {
                return;
            }
            long now = System.nanoTime();
            int committed = message.getPayload() instanceof List<?> batch ? batch.size() : 1;
            int total = this.committed.addAndGet(committed);
            if (this.firstCommit.compareAndSet(0, now)) {
                this.committedByTheFirst = total;
                this.cpuAtFirst = CpuTime.now();
            }
            this.lastCommit = now;
            if (total >= this.expected) {
                lastOfTheRun(total);
            }
            if (message.getPayload() instanceof List<?>) {
                if (this.measuring.get()
                        && message.getHeaders().get("amqp_batchedHeaders") instanceof List<?> headers) {
                    for (Object each : headers) {
                        record(now, ((Map<?, ?>) each).get(PUBLISHED_AT));
                    }
                }
            } else if (this.measuring.get()) {
                record(now, message.getHeaders().get(PUBLISHED_AT));
            }
        }

        private void record(long now, @Nullable Object publishedAt) {
            if (publishedAt instanceof Number published) {
                this.latencies.add(now - published.longValue());
            }
        }
    }
}
