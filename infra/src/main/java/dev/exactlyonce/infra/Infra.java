package dev.exactlyonce.infra;

import com.rabbitmq.client.Connection;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.infra.bench.BenchDatabase;
import dev.exactlyonce.infra.bench.OutboxBenchmark;
import dev.exactlyonce.infra.bench.OutboxBroker;
import dev.exactlyonce.infra.bench.PipelineBenchmark;
import dev.exactlyonce.infra.bench.PostgresServer;
import dev.exactlyonce.infra.bench.PurgeBenchmark;
import dev.exactlyonce.infra.shop.Demo;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The operations command line: {@code java -jar infra/target/infra-*.jar <command> ...}.
 *
 * <pre>
 * replay-dead-letters &lt;queue&gt; [--event-id &lt;uuid&gt;]... [--dry-run]
 *     Moves the dead letters of &lt;queue&gt;.dlq back to &lt;queue&gt;: all, or those of the given event ids.
 * </pre>
 */
public final class Infra {

    private static final String USAGE = """
            Usage: java -jar infra/target/infra-*.jar <command> [arguments]

            Commands:
              demo [--orders <n>] [--database-outage <s>] [--provider-freeze <s>] [--database postgresql|mariadb]
                  [--binder rabbitmq|kafka] [--cluster rabbitmq|kafka] [--console true]
                  The main job: runs the three services, the payment provider and the order service on
                  PostgreSQL (or MariaDB: --database mariadb) and RabbitMQ (localhost, or infra/compose.yaml
                  when Docker is there), fires all three sources of duplicates (relay republish, broker
                  redelivery, replay) over <n> orders (default 200), and reports what each service made of
                  them. Exit status 0: exactly once. --database-outage takes the database away from the
                  services for <s> seconds in the middle of the stream (the replay is published meanwhile) and
                  says how soon they resumed; --provider-freeze freezes the payment provider for <s> seconds
                  from the first order on (billing's requests go unanswered). The database server is PGHOST,
                  PGPORT, PGUSER, PGPASSWORD (default 127.0.0.1:5432, postgres), or MARIADB_HOST, MARIADB_PORT,
                  MARIADB_USER, MARIADB_PASSWORD (default 127.0.0.1:3306, root). RabbitMQ is RABBITMQ_HOST,
                  RABBITMQ_PORT, RABBITMQ_USERNAME, RABBITMQ_PASSWORD (default 127.0.0.1:5672, guest; on the
                  broker of compose.yaml, an administrator it makes): an administrator, since the demo creates
                  the shop's broker users. The
                  containers it starts from infra/compose.yaml keep running when it ends: stop them with
                  docker compose -f infra/compose.yaml down. --binder kafka runs the services with their kafka
                  profile on the brokers KAFKA_BROKERS names, or on one started in this process. --cluster
                  rabbitmq (or kafka, which implies --binder kafka) runs the shop on the three-node cluster of
                  infra/cluster.sh (RABBITMQ_CLUSTER and RABBITMQ_CLUSTER_CONTROL, or KAFKA_CLUSTER and
                  KAFKA_CLUSTER_CONTROL; infra/demo.sh --cluster starts it and sets them), kills the node leading
                  what stock consumes mid-run and then cuts another off for 30 s. On Kafka, the broker's
                  redeliveries come from killing every service once (kill -9), not from dropped connections.
                  --console true (RabbitMQ only) leaves the shop running after the report, with the
                  operator console (infra/console) on http://127.0.0.1:8090, and prints a password of the run
                  for its user operator; Ctrl-C stops both.

              replay-dead-letters <queue> [--event-id <uuid>]... [--dry-run]
                  Move the dead letters of <queue>.dlq back to <queue>: all of them, or those of the given
                  event ids (repeat --event-id, or separate ids with commas; an id is read from the envelope,
                  the message id, or the event_id or ce_id header). --dry-run lists them and replays nothing
                  (each listed dead letter goes to the back of <queue>.dlq, unchanged, in order).
                  Replaying an event the service already applied has no effect.

              outbox-parked [list | release <event id>... | skip <event id>... | release --all | skip --all]
                  Lists the outbox events a service's relay parked (the broker refused each
                  idempotency.outbox.relay.max-attempts times; the later events of its key wait behind it), or
                  releases them (the relay tries them again, then their keys' later events) or skips them
                  (never published; their keys' later events go on). Reads the service's database from
                  SPRING_DATASOURCE_URL, SPRING_DATASOURCE_USERNAME and SPRING_DATASOURCE_PASSWORD.

              bench-purge [--rows <n>] [--seconds <s>]
                  The guard's claim latency (p50, p99) while half of <n> rows (default 1,000,000) are purged,
                  against nothing removed, for the default table (batched purge) and the partitioned table
                  (partition drop), side by side. Runs in a database of its own on PGHOST (default
                  127.0.0.1:5432, PGUSER postgres), dropped at the end.

              bench-pipeline [--messages <n>] [--seconds <s>] [--rate <r>] [--concurrency <c>] [--ack-every <a>]
                             [--prefetch <p>] [--rounds <k>] [--scenarios <id>,...] [--database <d>]
                  Throughput and p50/p99 latency of the whole pipeline (RabbitMQ, binder, transaction, guard,
                  handler, commit, ack) without the guard, with it, emitting an event through the outbox (with
                  the relay publishing it, and without), with duplicates only, behind Spring Integration's
                  idempotent receiver, and in batches (one event per call, a function of a list, duplicates only,
                  and without a bound on a batch's wait), with the ratios between them. <n> events (default
                  10,000) per throughput run (five times as many for the scenarios in batches and the ceilings,
                  so that theirs last seconds too); <s> seconds (default 5) of events at <r> per second (default 400,
                  the same offered load for every scenario) for latency; <c> consumers per binding (default 2);
                  one message per transaction, a broker ack every <a> messages (default 1) and <p> unacknowledged
                  messages per consumer (default 100). Every scenario runs <k> times (default 3),
                  in turn, and the median run is reported: the machine's noise hits all scenarios alike.
                  Each run also gives its CPU time per event (the machine's, from /proc/stat on Linux: the
                  broker, the database and this JVM; and this JVM's), and the ratios are given again in events
                  per CPU second, which the disk's flushes and the cores' other tenants do not move.
                  --scenarios runs only those (ids: without-guard, guard, claim-by-hand (without the guard, the
                  handler running the guard's claim itself), emit, emit-without-relay, duplicates, peer, batch,
                  batch-of-lists, batch-duplicates, batch-unbounded, batch-ceiling, message-ceiling, sql-effect,
                  sql-claim, sql-batch, sql-list), and the ratios between them.
                  The SQL-only rows run straight on JDBC: sql-effect (the effect's insert) and sql-claim (the
                  guard's claim, then the insert), one transaction per event; sql-batch and sql-list, one
                  transaction per batch of 100: the batch's claim, then an insert per event or one JDBC batch.
                  With guard, batch and batch-of-lists are then compared with what their SQL alone predicts.
                  --database mariadb runs on MariaDB (MARIADB_HOST, default 127.0.0.1:3306, MARIADB_USER root)
                  instead of PostgreSQL (PGHOST), without the peer's scenario.

              bench-outbox [--events <n>] [--rate <r>] [--seconds <s>] [--rounds <k>] [--scenarios <id>,...]
                           [--broker rabbitmq|kafka] [--hold <s>]
                  The outbox relay, with publisher confirms (on Kafka, acks=all; the brokers KAFKA_BROKERS
                  names, or one started in this JVM): events/s while a backlog of <n> events (default
                  20,000, written in transactions of 500) is published, for one key (hot-key), 10 keys
                  (10-keys), 1,000 keys (1000-keys), 1,000 keys behind a key of 600 rows the broker refuses
                  (refused), and 1,000 keys published by the relays of two instances (two-relays); and the
                  p50/p99 from a commit to the event's arrival at a consumer, one event per transaction at <r>
                  per second (default 400) for <s> seconds (default 10) (latency). <k> rounds (default 3), every
                  scenario in turn in each, median and range, and the ratios between them. Only when named
                  (--scenarios held-xmin --rounds 1): 2,000 events/s for a minute, then while a REPEATABLE READ
                  transaction is held open for <s> seconds (--hold, default 600), then until the backlog is back;
                  events/s before and in the hold's last minute, and how long the backlog took to come back.

            The demo reads RabbitMQ from RABBITMQ_* (above). replay-dead-letters, bench-pipeline and bench-outbox
            read it from the services' variables: SPRING_RABBITMQ_HOST, SPRING_RABBITMQ_PORT,
            SPRING_RABBITMQ_USERNAME and SPRING_RABBITMQ_PASSWORD (default localhost:5672, guest).
            replay-dead-letters also reads SPRING_RABBITMQ_VIRTUAL_HOST (default /), and requires the user and
            password (the shop's replay user, for one).
            """;

    private Infra() {}

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    /** Runs a command; returns the process exit status. */
    static int run(String[] args, PrintStream out, PrintStream err) {
        return run(args, System.getenv(), out, err);
    }

    /** Runs a command with these environment variables; returns the process exit status. */
    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        if (args.length == 0 || args[0].equals("--help") || args[0].equals("help")) {
            out.print(USAGE);
            return args.length == 0 ? 2 : 0;
        }
        try {
            return switch (args[0]) {
                case "demo" -> demo(args, out);
                case "replay-dead-letters" -> replayDeadLetters(args, env, out);
                case "bench-purge" -> benchPurge(args, out);
                case "bench-pipeline" -> benchPipeline(args, out);
                case "bench-outbox" -> benchOutbox(args, out);
                case "outbox-parked" ->
                    new OutboxParkedCommand(env, out).run(List.of(args).subList(1, args.length));
                default -> {
                    err.printf("Unknown command '%s'.%n%n%s", args[0], USAGE);
                    yield 2;
                }
            };
        } catch (IllegalArgumentException ex) {
            err.printf("%s%n%n%s", ex.getMessage(), USAGE);
            return 2;
        } catch (IllegalStateException ex) {
            err.printf("%s failed: %s%n", args[0], ex.getMessage());
            return 1;
        } catch (Exception ex) {
            err.printf("%s failed: %s%n", args[0], ex);
            return 1;
        }
    }

    private static int replayDeadLetters(String[] args, Map<String, String> env, PrintStream out) throws Exception {
        String queue = null;
        Set<UUID> eventIds = new LinkedHashSet<>();
        boolean dryRun = false;
        List<String> rest = new ArrayList<>(List.of(args).subList(1, args.length));
        for (int i = 0; i < rest.size(); i++) {
            String arg = rest.get(i);
            if (arg.equals("--dry-run")) {
                dryRun = true;
            } else if (arg.equals("--event-id") && i + 1 < rest.size()) {
                eventIds.addAll(parseEventIds(rest.get(++i)));
            } else if (arg.startsWith("--event-id=")) {
                eventIds.addAll(parseEventIds(arg.substring("--event-id=".length())));
            } else if (!arg.startsWith("--") && queue == null) {
                queue = arg;
            } else {
                throw new IllegalArgumentException("Unexpected argument '%s'.".formatted(arg));
            }
        }
        if (queue == null) {
            throw new IllegalArgumentException("replay-dead-letters needs the queue, for example stock.events.");
        }
        if (env.get("SPRING_RABBITMQ_USERNAME") == null || env.get("SPRING_RABBITMQ_PASSWORD") == null) {
            throw new IllegalArgumentException(
                    "replay-dead-letters connects as the broker user that may move dead letters (the shop's"
                            + " 'replay'): set SPRING_RABBITMQ_USERNAME and SPRING_RABBITMQ_PASSWORD. It does not"
                            + " fall back to guest, an administrator of a fresh broker.");
        }
        BrokerSettings broker = BrokerSettings.fromEnvironment(env);
        out.printf("RabbitMQ at %s%n", broker);
        try (Connection connection = broker.connect("replay-dead-letters")) {
            new DeadLetterReplay(out).replay(connection, queue, eventIds, dryRun);
        }
        return 0;
    }

    private static int benchPurge(String[] args, PrintStream out) throws Exception {
        Map<String, String> options = options(args, "--rows", "--seconds");
        int rows = Integer.parseInt(options.getOrDefault("--rows", "1000000"));
        Duration span = Duration.ofSeconds(Long.parseLong(options.getOrDefault("--seconds", "10")));
        PurgeBenchmark benchmark = new PurgeBenchmark(PostgresServer.fromEnvironment(System.getenv()), out, span);
        benchmark.run(rows);
        return 0;
    }

    private static int benchPipeline(String[] args, PrintStream out) throws Exception {
        Map<String, String> options = options(
                args,
                "--messages",
                "--seconds",
                "--concurrency",
                "--ack-every",
                "--rate",
                "--prefetch",
                "--rounds",
                "--scenarios",
                "--database");
        new PipelineBenchmark(
                        BenchDatabase.named(options.getOrDefault("--database", "postgresql"), System.getenv()),
                        System.getenv(),
                        out,
                        Integer.parseInt(options.getOrDefault("--concurrency", "2")),
                        Integer.parseInt(options.getOrDefault("--ack-every", "1")),
                        Double.parseDouble(options.getOrDefault("--rate", "400")),
                        Integer.parseInt(options.getOrDefault("--prefetch", "100")),
                        Integer.parseInt(options.getOrDefault("--rounds", "3")),
                        options.containsKey("--scenarios")
                                ? List.of(options.get("--scenarios").split(","))
                                : List.of())
                .run(
                        Integer.parseInt(options.getOrDefault("--messages", "10000")),
                        Duration.ofSeconds(Long.parseLong(options.getOrDefault("--seconds", "5"))));
        return 0;
    }

    private static int benchOutbox(String[] args, PrintStream out) throws Exception {
        Map<String, String> options =
                options(args, "--events", "--rate", "--seconds", "--rounds", "--scenarios", "--broker", "--hold");
        try (OutboxBroker broker = OutboxBroker.named(options.getOrDefault("--broker", "rabbitmq"), System.getenv())) {
            new OutboxBenchmark(
                            PostgresServer.fromEnvironment(System.getenv()),
                            broker,
                            out,
                            Integer.parseInt(options.getOrDefault("--rounds", "3")),
                            options.containsKey("--scenarios")
                                    ? List.of(options.get("--scenarios").split(","))
                                    : List.of())
                    .run(
                            Integer.parseInt(options.getOrDefault("--events", "20000")),
                            Double.parseDouble(options.getOrDefault("--rate", "400")),
                            Duration.ofSeconds(Long.parseLong(options.getOrDefault("--seconds", "10"))),
                            Duration.ofSeconds(Long.parseLong(options.getOrDefault("--hold", "600"))));
        }
        return 0;
    }

    private static int demo(String[] args, PrintStream out) throws Exception {
        Map<String, String> options = options(
                args,
                "--orders",
                "--database-outage",
                "--provider-freeze",
                "--database",
                "--binder",
                "--cluster",
                "--console");
        String cluster = options.getOrDefault("--cluster", "none");
        if (!List.of("none", "rabbitmq", "kafka").contains(cluster)) {
            throw new IllegalArgumentException(
                    "--cluster takes rabbitmq or kafka (the clusters of infra/cluster.sh), not '%s'."
                            .formatted(cluster));
        }
        String binder = options.getOrDefault("--binder", cluster.equals("none") ? "rabbitmq" : cluster);
        if (!List.of("rabbitmq", "kafka").contains(binder)) {
            throw new IllegalArgumentException("--binder takes rabbitmq or kafka, not '%s'.".formatted(binder));
        }
        if (!cluster.equals("none") && !cluster.equals(binder)) {
            throw new IllegalArgumentException(
                    "--binder %s runs the shop on %s, and --cluster %s names the other broker's cluster."
                            .formatted(binder, binder, cluster));
        }
        return new Demo(out, System.getenv())
                .run(
                        options.getOrDefault("--database", "postgresql"),
                        Integer.parseInt(options.getOrDefault("--orders", "200")),
                        Duration.ofSeconds(Long.parseLong(options.getOrDefault("--database-outage", "0"))),
                        Duration.ofSeconds(Long.parseLong(options.getOrDefault("--provider-freeze", "0"))),
                        binder,
                        !cluster.equals("none"),
                        Boolean.parseBoolean(options.getOrDefault("--console", "false")));
    }

    /** Reads {@code --name value} options, each of the known names at most once. */
    static Map<String, String> options(String[] args, String... known) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i++) {
            if (!List.of(known).contains(args[i]) || i + 1 >= args.length) {
                throw new IllegalArgumentException("Unexpected argument '%s'.".formatted(args[i]));
            }
            options.put(args[i], args[++i]);
        }
        return options;
    }

    private static List<UUID> parseEventIds(String value) {
        List<UUID> ids = new ArrayList<>();
        for (String text : value.split(",")) {
            UUID id = EnvelopeCodec.parseCanonicalUuid(text.trim());
            if (id == null) {
                throw new IllegalArgumentException("'%s' is not an event id (a UUID).".formatted(text.trim()));
            }
            ids.add(id);
        }
        return ids;
    }
}
