package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * The guard's claim latency while old ids are removed, against the same latency with nothing removed: for the default
 * table, the library's batched purge of half the rows; for the partitioned table, the library's drop of the partitions
 * holding half the rows. Each table starts with the same number of rows, half older than the 30-day retention.
 *
 * <p>A claim is what the guard does per message: one transaction with one {@code INSERT ... ON CONFLICT DO NOTHING}
 * of a new UUID v7, committed. Two clients claim in a loop for the measured span.
 */
public final class PurgeBenchmark {

    private static final Duration RETENTION = Duration.ofDays(30);

    private static final int CLIENTS = 2;

    /** The guard's claim, as it runs it. */
    private static final String CLAIM = """
            INSERT INTO processed_event (event_id, scope, event_name) SELECT ?, '', 'bench.effect.v1'
            WHERE NOT EXISTS (SELECT FROM processed_event WHERE event_id = ? AND scope = '' AND event_name = '')
            ON CONFLICT DO NOTHING""";

    private static final String FILL = """
            INSERT INTO processed_event (event_id, processed_at)
            SELECT gen_random_uuid(), now() - interval '%d days' + make_interval(secs => n * %f)
            FROM generate_series(1, %d) n""";

    /** A v7 id made in SQL from a timestamp: 48 bits of milliseconds, version 7, random bits, variant 8. */
    private static final String FILL_V7 = """
            INSERT INTO processed_event (event_id, processed_at)
            SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7'
                    || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid, t
            FROM (SELECT now() - interval '%d days' + make_interval(secs => n * %f) AS t
                  FROM generate_series(1, %d) n) times""";

    private record Figures(
            String scenario, double seconds, int claims, double p50, double p99, double max, String removal) {

        double perSecond() {
            return this.claims / this.seconds;
        }
    }

    private final PostgresServer server;

    private final PrintStream out;

    private final Duration span;

    public PurgeBenchmark(PostgresServer server, PrintStream out, Duration span) {
        this.server = server;
        this.out = out;
        this.span = span;
    }

    public void run(int rows) throws Exception {
        String database =
                "bench_purge_" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffL);
        this.out.printf(
                "PostgreSQL %s, database %s: %,d rows, half older than %s%n", this.server, database, rows, RETENTION);
        this.server.execute("CREATE DATABASE " + database);
        List<Figures> figures = new ArrayList<>();
        try (HikariDataSource dataSource = this.server.dataSource(database, CLIENTS + 2)) {
            JdbcTemplate jdbc = new JdbcTemplate(dataSource);
            schema(dataSource, "schema-postgresql.sql");
            fill(jdbc, FILL, rows);
            figures.add(claims("default table, nothing removed", dataSource, null));
            ProcessedEventPurge purge = new ProcessedEventPurge(dataSource, "processed_event", RETENTION, 5_000);
            figures.add(claims("default table, the purge of half", dataSource, () -> {
                ProcessedEventPurge.Result result = purge.purge();
                return "%,d rows in %d batches, %.1f s"
                        .formatted(
                                result.rows(), result.batches(), result.took().toMillis() / 1000.0);
            }));

            jdbc.execute("DROP TABLE processed_event");
            schema(dataSource, "schema-postgresql-partitioned.sql");
            new ProcessedEventPartitions(dataSource, "processed_event", Duration.ofDays(60), 3).maintain();
            fill(jdbc, FILL_V7, rows);
            figures.add(claims("partitioned table, nothing removed", dataSource, null));
            ProcessedEventPartitions partitions =
                    new ProcessedEventPartitions(dataSource, "processed_event", RETENTION, 3);
            figures.add(claims("partitioned table, the drop of half", dataSource, () -> {
                long start = System.nanoTime();
                ProcessedEventPartitions.Result result = partitions.maintain();
                return "%d partitions in %.1f s".formatted(result.dropped().size(), (System.nanoTime() - start) / 1e9);
            }));
        } finally {
            this.server.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
        }
        report(figures);
    }

    private void report(List<Figures> figures) {
        this.out.printf(
                "%n%-40s %8s %9s %8s %8s %8s  %s%n",
                "claims by 2 clients, measured while", "seconds", "claims/s", "p50 ms", "p99 ms", "max ms", "removed");
        for (Figures row : figures) {
            this.out.printf(
                    "%-40s %8.1f %9.0f %8.2f %8.2f %8.1f  %s%n",
                    row.scenario(), row.seconds(), row.perSecond(), row.p50(), row.p99(), row.max(), row.removal());
        }
        this.out.printf(
                "%nclaims/s while removing / with nothing removed: purge %.2f x, partition drop %.2f x%n",
                figures.get(1).perSecond() / figures.get(0).perSecond(),
                figures.get(3).perSecond() / figures.get(2).perSecond());
        this.out.printf(
                "%np99 while removing / p99 with nothing removed: purge %.2f x, partition drop %.2f x%n"
                        + "time to remove half the rows: purge %.1f s, partition drop %.2f s%n",
                figures.get(1).p99() / figures.get(0).p99(),
                figures.get(3).p99() / figures.get(2).p99(),
                figures.get(1).seconds(),
                figures.get(3).seconds());
    }

    private static void schema(DataSource dataSource, String script) {
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/" + script))
                .execute(dataSource);
    }

    private void fill(JdbcTemplate jdbc, String sql, int rows) {
        long start = System.nanoTime();
        int half = rows / 2;
        double spread = 9 * 86_400.0 / half;
        jdbc.execute(sql.formatted(40, spread, half));
        jdbc.execute(sql.formatted(10, spread, rows - half));
        jdbc.execute("VACUUM ANALYZE processed_event");
        this.out.printf("  filled %,d rows in %.1f s%n", rows, (System.nanoTime() - start) / 1e9);
    }

    /**
     * Claims for the span, with nothing removed; or, when a removal is given, claims before it and measures the claims
     * made while it runs.
     */
    private Figures claims(String scenario, DataSource dataSource, @Nullable Supplier<String> removal)
            throws Exception {
        AtomicReference<Latencies> window = new AtomicReference<>(new Latencies());
        AtomicBoolean stop = new AtomicBoolean();
        List<CompletableFuture<Void>> clients = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            clients.add(CompletableFuture.runAsync(() -> claimUntil(dataSource, stop, window)));
        }
        // The clients run for the span (or a second of warm-up before the removal): this is the measurement.
        Thread.sleep(removal == null ? this.span.toMillis() : 1_000);
        Latencies measured = new Latencies();
        window.set(measured);
        long start = System.nanoTime();
        String removed = removal == null ? "" : removal.get();
        if (removal == null) {
            Thread.sleep(this.span.toMillis());
        }
        window.set(new Latencies());
        double seconds = (System.nanoTime() - start) / 1e9;
        stop.set(true);
        CompletableFuture.allOf(clients.toArray(CompletableFuture[]::new)).join();
        this.out.printf(
                "  %s: %,d claims in %.1f s%s%n",
                scenario, measured.count(), seconds, removed.isEmpty() ? "" : ", removed " + removed);
        return new Figures(
                scenario,
                seconds,
                measured.count(),
                measured.percentile(50),
                measured.percentile(99),
                measured.percentile(100),
                removed);
    }

    private static void claimUntil(DataSource dataSource, AtomicBoolean stop, AtomicReference<Latencies> window) {
        try (Connection connection = dataSource.getConnection();
                PreparedStatement claim = connection.prepareStatement(CLAIM)) {
            connection.setAutoCommit(false);
            while (!stop.get()) {
                UUID eventId = UuidV7.generate();
                long start = System.nanoTime();
                claim.setObject(1, eventId);
                claim.setObject(2, eventId);
                claim.executeUpdate();
                connection.commit();
                window.get().add(System.nanoTime() - start);
            }
        } catch (SQLException ex) {
            throw new IllegalStateException("A claim failed: " + ex.getMessage(), ex);
        }
    }
}
