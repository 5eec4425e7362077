package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.guard.IdempotencyGuard;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.observation.DefaultMeterObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The library's meters, tagged {@code function} (the functions composed after the guard) where they concern a binding,
 * each described in docs/reference.md, "Observability"; their alert rules are in docs/operations.md, "Alerts".
 */
public final class MicrometerIdempotencyMetrics implements IdempotencyMetrics {

    static final String PROCESSED = "idempotency.events.processed";

    public static final String DUPLICATES = "idempotency.events.duplicates";

    public static final String REJECTED = "idempotency.messages.rejected";

    static final String GUARD = IdempotencyGuard.OBSERVATION;

    public static final String PURGED = "idempotency.purge.rows";

    public static final String PURGE_RUNS = "idempotency.purge.runs";

    static final String PARTITIONS = "idempotency.partitions";

    public static final String HALTS = "idempotency.outage.halts";

    public static final String HALTED = "idempotency.outage.halted";

    public static final String HALTED_NOW = "idempotency.outage.halted.now";

    public static final String GIVEN_BACK = "idempotency.outage.given.back";

    public static final String TRIALS_FAILED = "idempotency.outage.trials.failed";

    /** When the halt in progress began, in epoch milliseconds; 0 while consumption runs. */
    private final AtomicLong haltedSince = new AtomicLong();

    static final String OUTBOX_WRITTEN = "idempotency.outbox.written";

    public static final String OUTBOX_PUBLISHED = "idempotency.outbox.published";

    static final String OUTBOX_FAILURES = "idempotency.outbox.publish.failures";

    public static final String OUTBOX_LAG = "idempotency.outbox.lag";

    public static final String OUTBOX_PARKED = "idempotency.outbox.parked";

    public static final String DEAD_LETTERS_WAITING = "idempotency.dead-letters.waiting";

    public static final String DEAD_LETTERS_OLDEST_AGE = "idempotency.dead-letters.oldest.age";

    public static final String DEAD_LETTERS_RETENTION = "idempotency.dead-letters.retention";

    public static final String PROCESSED_OLDEST_AGE = "idempotency.processed.oldest.age";

    public static final String PROCESSED_RETENTION = "idempotency.processed.retention";

    private final AtomicLong outboxLagMillis = new AtomicLong();

    private final AtomicLong outboxParked = new AtomicLong();

    private final AtomicLong deadLettersWaiting = new AtomicLong();

    /** When the oldest dead letter still waiting was dead-lettered, in epoch milliseconds; 0 when none waits. */
    private final AtomicLong oldestDeadLetter = new AtomicLong();

    private final AtomicLong deadLetterRetentionSeconds = new AtomicLong();

    /** When the oldest processed id kept was written (or its partition's day began), in epoch milliseconds; 0: none. */
    private final AtomicLong oldestProcessed = new AtomicLong();

    private final AtomicLong processedRetentionSeconds = new AtomicLong();

    private record BindingMeters(Counter processed, Counter duplicates) {}

    private final MeterRegistry registry;

    private final String tableName;

    private final Map<GuardedBinding, BindingMeters> bindings = new ConcurrentHashMap<>();

    /** The guard's observations, timed as {@value #GUARD}, for a service without an observation registry. */
    private final ObservationRegistry observations;

    MicrometerIdempotencyMetrics(MeterRegistry registry, String tableName) {
        this.registry = registry;
        this.tableName = tableName;
        this.observations = ObservationRegistry.create();
        this.observations.observationConfig().observationHandler(new DefaultMeterObservationHandler(registry));
        Gauge.builder(OUTBOX_LAG, this.outboxLagMillis, millis -> millis.get() / 1000.0)
                .description(
                        "How long the oldest outbox row not parked has waited to be published, as the relay last saw it")
                .baseUnit("seconds")
                .register(registry);
        Gauge.builder(HALTED_NOW, this.haltedSince, since -> {
                    long began = since.get();
                    return began == 0 ? 0 : Math.max(0, System.currentTimeMillis() - began) / 1e3;
                })
                .description("How long the guarded bindings' consumption has been halted, 0 while it runs")
                .baseUnit("seconds")
                .register(registry);
        Gauge.builder(OUTBOX_PARKED, this.outboxParked, AtomicLong::get)
                .description("Outbox rows parked after the broker refused them, holding their keys back")
                .register(registry);
        Gauge.builder(DEAD_LETTERS_WAITING, this.deadLettersWaiting, AtomicLong::get)
                .description("Dead letters still waiting to be replayed (recorded within the dead-letters' retention,"
                        + " no replay of them applied), as the purge last saw them")
                .register(registry);
        Gauge.builder(DEAD_LETTERS_OLDEST_AGE, this.oldestDeadLetter, oldest -> {
                    long at = oldest.get();
                    return at == 0 ? 0 : Math.max(0, System.currentTimeMillis() - at) / 1e3;
                })
                .description("How long the oldest dead letter still waiting has waited: once past"
                        + " idempotency.replay-horizon.dead-letter-retention, a replay of it is refused")
                .baseUnit("seconds")
                .register(registry);
        Gauge.builder(DEAD_LETTERS_RETENTION, this.deadLetterRetentionSeconds, AtomicLong::get)
                .description("How long a dead letter is taken back when replayed"
                        + " (idempotency.replay-horizon.dead-letter-retention)")
                .baseUnit("seconds")
                .register(registry);
        Gauge.builder(PROCESSED_OLDEST_AGE, this.oldestProcessed, oldest -> {
                    long at = oldest.get();
                    return at == 0 ? 0 : Math.max(0, System.currentTimeMillis() - at) / 1e3;
                })
                .description("How old the oldest processed id kept is (its row, or its partition's first day), as the"
                        + " purge or the partitions' maintenance last left the table")
                .baseUnit("seconds")
                .register(registry);
        Gauge.builder(PROCESSED_RETENTION, this.processedRetentionSeconds, AtomicLong::get)
                .description("How long processed ids are kept (idempotency.retention)")
                .baseUnit("seconds")
                .register(registry);
    }

    @Override
    public void processed(GuardedBinding binding, int events) {
        meters(binding).processed().increment(events);
    }

    @Override
    public void duplicates(GuardedBinding binding, int copies) {
        meters(binding).duplicates().increment(copies);
    }

    @Override
    public void rejected(GuardedBinding binding, Reason reason) {
        Counter.builder(REJECTED)
                .description("Messages rejected without retry")
                .tag("function", binding.functions())
                .tag("reason", reason.name())
                .register(this.registry)
                .increment();
    }

    @Override
    public ObservationRegistry observations() {
        return this.observations;
    }

    @Override
    public void purged(boolean ran, long rows, Duration took) {
        Counter.builder(PURGED)
                .description("Processed event ids deleted by the purge")
                .tag("table", this.tableName)
                .register(this.registry)
                .increment(rows);
        Timer.builder(PURGE_RUNS)
                .description("Purge runs")
                .tag("table", this.tableName)
                .tag("outcome", ran ? "purged" : "skipped")
                .register(this.registry)
                .record(took);
    }

    @Override
    public void partitionsMaintained(int created, int dropped, Duration took) {
        partitions("created").increment(created);
        partitions("dropped").increment(dropped);
    }

    @Override
    public void halted(Instant since) {
        this.haltedSince.set(Math.max(1, since.toEpochMilli()));
        Counter.builder(HALTS)
                .description("Halts of the guarded bindings' consumption while a dependency was unavailable")
                .register(this.registry)
                .increment();
    }

    @Override
    public void resumed(Duration halted) {
        this.haltedSince.set(0);
        Timer.builder(HALTED)
                .description("How long the guarded bindings' consumption was halted, per outage")
                .register(this.registry)
                .record(halted);
    }

    @Override
    public void trialFailed() {
        Counter.builder(TRIALS_FAILED)
                .description("Messages tried once the outage probe's write went through that met the outage again")
                .register(this.registry)
                .increment();
    }

    @Override
    public void givenBack() {
        Counter.builder(GIVEN_BACK)
                .description("Deliveries given back to the broker during an outage, to be delivered again")
                .register(this.registry)
                .increment();
    }

    @Override
    public void outboxWritten(int events) {
        Counter.builder(OUTBOX_WRITTEN)
                .description("Events written to the outbox by committed transactions")
                .register(this.registry)
                .increment(events);
    }

    @Override
    public void outboxPublished(int events) {
        Counter.builder(OUTBOX_PUBLISHED)
                .description("Outbox events published by the relay and confirmed by the broker, copies included")
                .register(this.registry)
                .increment(events);
    }

    @Override
    public void outboxPublishFailed() {
        Counter.builder(OUTBOX_FAILURES)
                .description("Runs of the outbox relay that did not publish every row they read")
                .register(this.registry)
                .increment();
    }

    @Override
    public void outboxLag(Duration lag) {
        this.outboxLagMillis.set(lag.toMillis());
    }

    @Override
    public void outboxParked(long rows) {
        this.outboxParked.set(rows);
    }

    @Override
    public void deadLettersWaiting(long count, @Nullable Instant oldest, Duration retention) {
        this.deadLettersWaiting.set(count);
        this.oldestDeadLetter.set(oldest != null ? oldest.toEpochMilli() : 0);
        this.deadLetterRetentionSeconds.set(retention.toSeconds());
    }

    @Override
    public void processedIdsKept(@Nullable Instant oldest, Duration retention) {
        this.oldestProcessed.set(oldest != null ? Math.max(1, oldest.toEpochMilli()) : 0);
        this.processedRetentionSeconds.set(retention.toSeconds());
    }

    private Counter partitions(String action) {
        return Counter.builder(PARTITIONS)
                .description("Partitions of processed event ids created or dropped")
                .tag("table", this.tableName)
                .tag("action", action)
                .register(this.registry);
    }

    private BindingMeters meters(GuardedBinding binding) {
        return this.bindings.computeIfAbsent(binding, key -> {
            String function = key.functions();
            return new BindingMeters(
                    Counter.builder(PROCESSED)
                            .description("Events processed: first deliveries committed with their effect")
                            .tag("function", function)
                            .register(this.registry),
                    Counter.builder(DUPLICATES)
                            .description("Copies of processed events discarded")
                            .tag("function", function)
                            .register(this.registry));
        });
    }
}
