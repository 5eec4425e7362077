package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.OutboxProperties;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * Publishes committed outbox rows and marks them published; see docs/outbox.md, "The relay". A run is one transaction:
 * <ol>
 *   <li>reads keys' heads ({@link PendingKeys}), chooses those not held whose head waited longest, and locks those of
 *       their partitions it can, never waiting;
 *   <li>reads those keys' oldest rows from their heads;
 *   <li>publishes them ({@link OutboxSender}) and marks those confirmed; a refused row holds its key back, or parks.
 * </ol>
 */
public final class OutboxRelay implements SmartLifecycle {

    private static final Logger logger = LoggerFactory.getLogger(OutboxRelay.class);

    /**
     * Read committed: under REPEATABLE READ (MariaDB's default) a run would read rows as of its first read, before
     * another relay that held its partitions marked them, and publish them twice.
     */
    private static final TransactionDefinition RUN = readCommitted();

    private static final Duration STOP_WAIT = Duration.ofSeconds(2);

    static final Duration CONTENDED_RETRY = Duration.ofMillis(50);

    /** The key partitions the relays of several instances share out, one run's worth at a time. */
    static final int PARTITIONS = 256;

    /** The most keys' heads a run reads (one index probe each); the others wait for later runs. */
    static final int MAX_KEYS = 10_000;

    /**
     * What a run did: {@code ran} is false when every partition it found rows in was another instance's; {@code more},
     * a key had more rows than its share (the next run goes at once); {@code unanswered}, rows were held rather than
     * published ({@link Holds}); {@code nextAttempt}, how soon a held-back key's back-off ends.
     */
    record Run(
            boolean ran,
            int read,
            boolean more,
            int published,
            @Nullable String failure,
            boolean unanswered,
            int held,
            boolean contended,
            @Nullable Duration nextAttempt) {

        static Run idle(boolean ran, boolean contended) {
            return new Run(ran, 0, false, 0, null, false, 0, contended, null);
        }

        /** Whether every row it read waited for a hold: nothing it could do until one ends. */
        boolean heldOnly() {
            return this.read > 0 && this.published == 0 && this.held > 0 && !this.contended;
        }
    }

    private final JdbcTemplate jdbc;

    private final PlatformTransactionManager transactions;

    private final OutboxSender publisher;

    private final String destination;

    private final int batchSize;

    private final int maxAttempts;

    private final Duration pollInterval;

    private final Duration linger;

    private final Duration firstHold;

    private final Duration longestHold;

    private final IdempotencyMetrics metrics;

    private final Semaphore wakeUps = new Semaphore(0);

    /** The keys with unpublished rows, read afresh at each start. */
    private volatile PendingKeys keys = new PendingKeys();

    /** The lag the last run that succeeded measured, and when: while runs fail, the lag gauge goes on from it. */
    private volatile Duration measuredLag = Duration.ZERO;

    private volatile long measuredAt = System.nanoTime();

    /** When a commit first woke the relay up since its last run that succeeded ({@link #NEVER} if none did). */
    private final AtomicLong wokenSince = new AtomicLong(NEVER);

    private static final long NEVER = Long.MIN_VALUE;

    private volatile CountDownLatch stopping = new CountDownLatch(1);

    private volatile boolean running;

    private volatile @Nullable Thread thread;

    OutboxRelay(
            DataSource dataSource,
            OutboxSender publisher,
            String destination,
            OutboxProperties.Relay properties,
            IdempotencyMetrics metrics) {
        this.jdbc = new JdbcTemplate(dataSource);
        this.transactions =
                new RelayTransactions(dataSource, properties.confirmTimeout().plusSeconds(30));
        this.publisher = publisher;
        this.destination = destination;
        this.batchSize = properties.batchSize();
        this.maxAttempts = properties.maxAttempts();
        this.pollInterval = properties.pollInterval();
        this.linger = properties.linger();
        this.firstHold = properties.firstHold();
        this.longestHold = properties.longestHold();
        this.metrics = metrics;
        publisher.onReturn(this::wake);
    }

    private static TransactionDefinition readCommitted() {
        DefaultTransactionDefinition definition = new DefaultTransactionDefinition();
        definition.setIsolationLevel(TransactionDefinition.ISOLATION_READ_COMMITTED);
        return definition;
    }

    /** Runs the relay soon: a transaction that wrote rows committed. */
    void wake() {
        this.wokenSince.compareAndSet(NEVER, System.nanoTime());
        if (this.wakeUps.availablePermits() == 0) {
            this.wakeUps.release();
        }
    }

    /** Publishes one batch of unpublished rows now, of the keys no other instance is publishing. */
    Run publishPending() {
        TransactionStatus transaction = this.transactions.getTransaction(RUN);
        Run run;
        try {
            Choice choice = choose(this.keys.read(sql(), this.jdbc, MAX_KEYS));
            Run batch = publishBatch(choice.keys());
            // Read once the run's refusals are counted: the parked rows it set aside count, and their back-off.
            Duration nextAttempt = readHeld(choice.lag());
            run = new Run(
                    batch.ran(),
                    batch.read(),
                    batch.more() || choice.more(),
                    batch.published(),
                    batch.failure(),
                    batch.unanswered(),
                    batch.held() + choice.held(),
                    batch.contended(),
                    nextAttempt);
        } catch (RuntimeException | Error ex) {
            rollBack(transaction, ex);
            throw ex;
        }
        this.transactions.commit(transaction);
        this.wokenSince.set(NEVER);
        if (run.failure() != null) {
            this.metrics.outboxPublishFailed();
        }
        return run;
    }

    /** Rolls the run back; a rollback that fails too (the connection lost) is told with the failure that caused it. */
    private void rollBack(TransactionStatus transaction, Throwable failure) {
        try {
            this.transactions.rollback(transaction);
        } catch (RuntimeException ex) {
            failure.addSuppressed(ex);
        }
    }

    /** Up to {@code batch-size} keys not held whose head waited longest; one only of a destination whose hold ended. */
    private Choice choose(PendingKeys.Read read) {
        List<OutboxStatements.Head> heads = read.heads();
        Holds holds = this.publisher.holds();
        double lag = 0;
        int held = 0;
        List<OutboxStatements.Head> ready = new ArrayList<>();
        for (OutboxStatements.Head head : heads) {
            if (head.held()) {
                continue;
            }
            lag = Math.max(lag, head.waited());
            String key = OutboxSender.Row.orderKey(head.destination(), head.key());
            if (holds.holds(head.destination(), head.eventName(), key) || this.publisher.sending(key)) {
                held++;
            } else {
                ready.add(head);
            }
        }
        ready.sort(Comparator.comparingDouble(OutboxStatements.Head::waited).reversed());
        List<OutboxStatements.Head> keys = new ArrayList<>();
        Set<String> probed = new HashSet<>();
        for (OutboxStatements.Head head : ready) {
            if (keys.size() == this.batchSize) {
                break;
            }
            if (!holds.probing(head.destination()) || probed.add(head.destination())) {
                keys.add(head);
            }
        }
        return new Choice(keys, lag, held, keys.size() < ready.size() || read.more());
    }

    /** The keys chosen, the lag, the keys waiting for a hold, and whether ready keys were left for the next run. */
    private record Choice(List<OutboxStatements.Head> keys, double lag, int held, boolean more) {}

    /** Publishes the oldest rows of the keys whose partition it locked, an even share of {@code batch-size} each. */
    private Run publishBatch(List<OutboxStatements.Head> keys) {
        if (keys.isEmpty()) {
            return Run.idle(true, false);
        }
        List<Integer> partitions = keys.stream()
                .map(OutboxStatements.Head::partition)
                .distinct()
                .sorted()
                .toList();
        Set<Integer> locked = new HashSet<>(sql().lockPartitions(this.jdbc, partitions));
        if (locked.isEmpty()) {
            return Run.idle(false, true);
        }
        List<OutboxStatements.Head> ours =
                keys.stream().filter(head -> locked.contains(head.partition())).toList();
        int share = (this.batchSize + ours.size() - 1) / ours.size();
        List<OutboxSender.Row> rows = sql().pending(this.jdbc, ours, share);
        boolean more = rows.stream()
                .collect(Collectors.groupingBy(OutboxSender.Row::orderKey, Collectors.counting()))
                .values()
                .stream()
                .anyMatch(count -> count >= share);
        OutboxSender.Published published = this.publisher.publish(rows);
        // Counted as they went out: a run whose mark then fails published them all the same.
        this.metrics.outboxPublished(published.confirmed().size());
        if (!published.confirmed().isEmpty()) {
            sql().markPublished(this.jdbc, published.confirmed());
        }
        if (!published.refused().isEmpty()) {
            holdBack(published.refused());
        }
        return new Run(
                true,
                rows.size(),
                more,
                published.confirmed().size(),
                published.failure(),
                published.unanswered() != null,
                published.held(),
                locked.size() < partitions.size(),
                null);
    }

    /** Reads the parked rows and the lag into the meters; returns how soon a held key's back-off ends. */
    private @Nullable Duration readHeld(double headsLag) {
        return this.jdbc.queryForObject(sql().held(), (row, index) -> {
            this.metrics.outboxParked(row.getLong(1));
            double seconds = row.getDouble(2);
            Duration nextAttempt = row.wasNull() ? null : Duration.ofMillis(Math.max(0, (long) (seconds * 1000)));
            double lag = Math.max(headsLag, row.getDouble(3));
            this.measuredLag = Duration.ofMillis((long) (lag * 1000));
            this.measuredAt = System.nanoTime();
            this.metrics.outboxLag(this.measuredLag);
            return nextAttempt;
        });
    }

    private void holdBack(List<OutboxSender.Refusal> refusals) {
        sql().holdBack(this.jdbc, refusals, this.maxAttempts, this.firstHold, this.longestHold, row -> {
            Duration retry = Duration.ofMillis((long) (row.getDouble(5) * 1000));
            if (row.getBoolean(4)) {
                logger.warn(
                        "Outbox event {} (key {}) was refused {} time(s) and is parked: its key's later events"
                                + " wait until it is released or skipped (the outbox endpoint, or the infra"
                                + " command outbox-parked). Last refusal: {}",
                        row.getObject(1),
                        row.getString(2),
                        row.getInt(3),
                        reasonOf(refusals, row.getObject(1, UUID.class)));
            } else {
                logger.warn(
                        "Outbox event {} (key {}) was refused (attempt {} of {}); its key's later events wait,"
                                + " and it is tried again in {}: {}",
                        row.getObject(1),
                        row.getString(2),
                        row.getInt(3),
                        this.maxAttempts,
                        retry,
                        reasonOf(refusals, row.getObject(1, UUID.class)));
            }
        });
    }

    private static String reasonOf(List<OutboxSender.Refusal> refusals, UUID id) {
        return refusals.stream()
                .filter(refusal -> refusal.row().id().equals(id))
                .map(OutboxSender.Refusal::reason)
                .findFirst()
                .orElse("");
    }

    private static @Nullable Duration earliest(@Nullable Duration one, @Nullable Duration other) {
        if (one == null) {
            return other;
        }
        return other == null || one.compareTo(other) <= 0 ? one : other;
    }

    private void relay() {
        int failures = 0;
        BackOffExecution retries = null;
        // A thread given up by stop() (its run outlasted the wait) ends once it sees it is no longer the relay's.
        while (this.running && Thread.currentThread() == this.thread) {
            Run run;
            try {
                run = publishPending();
                while (this.running && run.more() && run.published() > 0) {
                    run = publishPending();
                }
            } catch (RuntimeException | Error ex) {
                // Whatever failed (the database away, a heap exhausted by a run of large rows), the relay goes on.
                this.metrics.outboxPublishFailed();
                this.metrics.outboxLag(estimatedLag());
                if (ex instanceof Error) {
                    logger.error("A run of the outbox relay failed with an error; it tries again", ex);
                }
                failures++;
                if (retries == null) {
                    retries = waits(this.firstHold, this.longestHold).start();
                }
                backOff(failures, Duration.ofMillis(retries.nextBackOff()), ex.toString());
                continue;
            }
            if (failures > 0) {
                logger.info("The outbox relay publishes again, after {} failed run(s)", failures);
                failures = 0;
                retries = null;
            }
            awaitWork(run);
        }
    }

    /** The lag while runs fail: the one last measured, grown since, or how long ago a commit first woke the relay. */
    private Duration estimatedLag() {
        long now = System.nanoTime();
        Duration grown = this.measuredLag.isZero() ? Duration.ZERO : this.measuredLag.plusNanos(now - this.measuredAt);
        long woken = this.wokenSince.get();
        Duration waiting = woken == NEVER ? Duration.ZERO : Duration.ofNanos(now - woken);
        return grown.compareTo(waiting) >= 0 ? grown : waiting;
    }

    private void backOff(int failures, Duration retry, String failure) {
        if (failures == 1) {
            logger.warn(
                    "A run of the outbox relay failed; its rows stay unpublished (any it sent go out again, with their"
                            + " ids), and it tries again in {}, then less and less often, up to every {}: {}",
                    retry,
                    this.longestHold,
                    failure);
        } else {
            logger.debug("The outbox relay could not publish (failure {} in a row): {}", failures, failure);
        }
        pause(retry);
    }

    /**
     * Waits for a commit's wake-up, a hold's or back-off's end, or the poll. After a run whose every row waited for a
     * hold, commits do not wake it before the first hold ends: their rows would most likely wait too.
     */
    private void awaitWork(Run run) {
        Duration holdEnd = this.publisher.holds().nextEnd();
        Duration wait = earliest(earliest(this.pollInterval, run.nextAttempt()), holdEnd);
        if (run.contended()) {
            wait = earliest(wait, CONTENDED_RETRY);
        }
        if (run.unanswered() && run.published() > 0) {
            wait = earliest(wait, this.firstHold);
        }
        if (run.heldOnly()) {
            // A hold that ended since the run is tried at once, not left for the poll interval.
            pause(holdEnd != null ? wait : Duration.ZERO);
            this.wakeUps.drainPermits();
            return;
        }
        try {
            if (this.wakeUps.tryAcquire(Math.max(1, wait.toMillis()), TimeUnit.MILLISECONDS) && !this.linger.isZero()) {
                // Woken by a commit: the next commits' rows join this run (one transaction per linger, not per commit).
                pause(this.linger);
            }
            this.wakeUps.drainPermits();
        } catch (InterruptedException ex) {
            // Only stop() ends the relay: an interrupt from elsewhere is not a reason to.
            Thread.interrupted();
        }
    }

    /** Every wait of the relay before it tries again (failed runs, holds, refused rows): doubling up to the longest. */
    static ExponentialBackOff waits(Duration first, Duration longest) {
        ExponentialBackOff waits = new ExponentialBackOff(first.toMillis(), 2);
        waits.setMaxInterval(longest.toMillis());
        return waits;
    }

    /** Waits that long, or until the relay stops. */
    private void pause(Duration duration) {
        try {
            this.stopping.await(duration.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException ex) {
            Thread.interrupted();
        }
    }

    @Override
    public synchronized void start() {
        if (!tableExists()) {
            logger.info("No outbox_event table in the service's schema: the outbox relay is off. Create it from the"
                    + " library's schema-postgresql.sql or schema-mariadb.sql (or let the library migrate it with"
                    + " Flyway) to emit events");
            return;
        }
        this.publisher.check(this.destination);
        this.keys = new PendingKeys();
        this.running = true;
        this.stopping = new CountDownLatch(1);
        Thread thread = new Thread(this::relay, "idempotency-outbox-relay");
        thread.setDaemon(true);
        this.thread = thread;
        thread.start();
        logger.info(
                "Relaying the outbox: batches of up to {}, after each commit and every {}",
                this.batchSize,
                this.pollInterval);
    }

    private OutboxStatements sql() {
        return OutboxStatements.of(Dialect.of(Objects.requireNonNull(this.jdbc.getDataSource())));
    }

    /** Whether the table exists; assumed so when the database cannot say (the runs then report what is wrong). */
    private boolean tableExists() {
        try {
            return OutboxBacklogQuery.tableExists(this.jdbc);
        } catch (RuntimeException ex) {
            return true;
        }
    }

    @Override
    public synchronized void stop() {
        this.running = false;
        Thread thread = this.thread;
        if (thread != null) {
            this.stopping.countDown();
            this.wakeUps.release();
            try {
                // A run that does not finish in time is abandoned: it never commits, so its rows stay unpublished.
                thread.join(STOP_WAIT.toMillis());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
            this.thread = null;
        }
        this.publisher.close();
    }

    @Override
    public synchronized boolean isRunning() {
        return this.running;
    }

    Holds holds() {
        return this.publisher.holds();
    }

    /** Whether the relay is meant to run and its thread does not: the outbox's health is then down. */
    boolean stalled() {
        Thread thread = this.thread;
        return this.running && (thread == null || !thread.isAlive());
    }
}
