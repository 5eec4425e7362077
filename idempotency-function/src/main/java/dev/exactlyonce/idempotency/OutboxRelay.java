package dev.exactlyonce.idempotency;

import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Publishes the outbox's committed rows, then marks them published.
 *
 * <p>Each run is one database transaction that:
 *
 * <ol>
 *   <li>takes a transaction-level advisory lock, or does nothing when another instance of the service holds it: one
 *       relay publishes at a time, so no row is published by two at once and the events of a key leave in the order
 *       they were written (the lock goes with the transaction: an instance that dies never keeps it);
 *   <li>reads the oldest unpublished rows, by the order they were written, up to {@code batch-size}. It selects by
 *       {@code published_at IS NULL}, never by a position past the last one published: a transaction that wrote a
 *       row before another but commits after it is published by the next run, not skipped;
 *   <li>publishes them ({@link OutboxPublisher}) and waits for the broker's confirms;
 *   <li>marks the rows the broker confirmed, and commits. A row it did not confirm stays unpublished, and so do the
 *       later rows of its key (read in this run, they wait for the next); other keys go on.
 * </ol>
 *
 * <p>A relay that stops between publishing and marking (killed, or its commit failed) publishes those rows again on
 * its next run, with the same event ids: the consumers' guards discard the copies. It runs right after a commit that
 * wrote rows ({@link #wake()}, after {@code linger}, so that the rows of the next commits join the run), again at once
 * while it finds full batches, and every {@code poll-interval} otherwise.
 * After a failed run (the broker or the database away) it tries again in 1 s, then less and less often, up to every
 * {@value #MAX_RETRY_SECONDS} s.
 */
final class OutboxRelay implements SmartLifecycle {

    private static final Logger logger = LoggerFactory.getLogger(OutboxRelay.class);

    /** How long stopping waits for a run under way. */
    private static final Duration STOP_WAIT = Duration.ofSeconds(2);

    /** The longest a failing relay waits before it tries again. */
    static final int MAX_RETRY_SECONDS = 30;

    static final Duration MAX_RETRY_DELAY = Duration.ofSeconds(MAX_RETRY_SECONDS);

    private static final String LOCK = """
            SELECT pg_try_advisory_xact_lock(hashtext('dev.exactlyonce.idempotency.outbox'), hashtext(current_schema()))""";

    private static final String PENDING = """
            SELECT id, aggregatetype, aggregateid, type, payload::text, occurred_at,
                   extract(epoch FROM clock_timestamp() - occurred_at) AS waited
            FROM outbox_event WHERE published_at IS NULL ORDER BY position LIMIT ?""";

    private static final String MARK = """
            UPDATE outbox_event SET published_at = now() WHERE id = ANY (?)""";

    /**
     * What a run did.
     *
     * @param ran whether it ran: {@code false} when another instance was publishing
     * @param published the rows it published and marked
     * @param failure why it stopped before the rows it read were all published, if it did
     */
    record Run(boolean ran, int published, @Nullable String failure) {}

    private final JdbcTemplate jdbc;

    private final TransactionTemplate transactions;

    private final OutboxPublisher publisher;

    private final int batchSize;

    private final Duration pollInterval;

    private final Duration linger;

    private final IdempotencyMetrics metrics;

    private final Semaphore wakeUps = new Semaphore(0);

    private volatile CountDownLatch stopping = new CountDownLatch(1);

    private volatile boolean running;

    private volatile @Nullable Thread thread;

    OutboxRelay(
            DataSource dataSource,
            OutboxPublisher publisher,
            int batchSize,
            Duration pollInterval,
            Duration linger,
            IdempotencyMetrics metrics) {
        this.jdbc = new JdbcTemplate(dataSource);
        this.transactions = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
        this.publisher = publisher;
        this.batchSize = batchSize;
        this.pollInterval = pollInterval;
        this.linger = linger;
        this.metrics = metrics;
    }

    /** Runs the relay soon: a transaction that wrote rows committed. */
    void wake() {
        if (this.wakeUps.availablePermits() == 0) {
            this.wakeUps.release();
        }
    }

    /** Publishes one batch of unpublished rows now, unless another instance is publishing. */
    Run publishPending() {
        Run run = this.transactions.execute(transaction -> {
            if (!Boolean.TRUE.equals(this.jdbc.queryForObject(LOCK, Boolean.class))) {
                return new Run(false, 0, null);
            }
            double[] waited = {0};
            List<OutboxPublisher.Row> rows = this.jdbc.query(
                    PENDING,
                    (row, index) -> {
                        if (index == 0) {
                            waited[0] = row.getDouble(7);
                        }
                        return new OutboxPublisher.Row(
                                row.getObject(1, UUID.class),
                                row.getString(2),
                                row.getString(3),
                                row.getString(4),
                                row.getString(5),
                                row.getTimestamp(6).toInstant());
                    },
                    this.batchSize);
            this.metrics.outboxLag(Duration.ofMillis((long) (waited[0] * 1000)));
            if (rows.isEmpty()) {
                return new Run(true, 0, null);
            }
            OutboxPublisher.Published published = this.publisher.publish(rows);
            // Counted as they went out: a run whose mark then fails published them all the same (and its next run
            // publishes them again, counted again).
            this.metrics.outboxPublished(published.confirmed().size());
            if (!published.confirmed().isEmpty()) {
                this.jdbc.update(MARK, (Object) published.confirmed().toArray(UUID[]::new));
            }
            return new Run(true, published.confirmed().size(), published.failure());
        });
        if (run.failure() != null) {
            this.metrics.outboxPublishFailed();
        }
        return run;
    }

    private void relay() {
        int failures = 0;
        // A thread given up by stop() (its run outlasted the wait) ends once it sees it is no longer the relay's.
        while (this.running && Thread.currentThread() == this.thread) {
            String failure;
            boolean progress = false;
            try {
                Run run = publishPending();
                while (this.running && run.failure() == null && run.published() == this.batchSize) {
                    run = publishPending();
                }
                failure = run.failure();
                progress = run.published() > 0;
            } catch (RuntimeException ex) {
                this.metrics.outboxPublishFailed();
                failure = ex.toString();
            }
            // A run that published nothing backs off; one that published the other keys' rows goes on as usual (its
            // failed rows are tried again by the next run).
            if (failure != null && !progress) {
                failures++;
                Duration retry = retryDelay(failures);
                if (failures == 1) {
                    logger.warn(
                            "A run of the outbox relay failed; its rows stay unpublished (any it sent go out again,"
                                    + " with their ids), and it tries again in {}, then less and less often, up to"
                                    + " every {}: {}",
                            retry,
                            MAX_RETRY_DELAY,
                            failure);
                } else {
                    logger.debug("The outbox relay could not publish (failure {} in a row): {}", failures, failure);
                }
                pause(retry);
                continue;
            }
            if (failure != null) {
                logger.debug("The outbox relay published some rows and not others: {}", failure);
            } else if (failures > 0) {
                logger.info("The outbox relay publishes again, after {} failed run(s)", failures);
                failures = 0;
            }
            try {
                if (this.wakeUps.tryAcquire(this.pollInterval.toMillis(), TimeUnit.MILLISECONDS)
                        && !this.linger.isZero()) {
                    // Woken by a commit: let the next commits' rows join this run, so that a stream of small
                    // transactions costs the relay one transaction per linger, not one per commit.
                    pause(this.linger);
                }
                this.wakeUps.drainPermits();
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** After failures in a row: 1 s, 2 s, 4 s, ... up to {@link #MAX_RETRY_DELAY}, whatever wakes the relay up. */
    static Duration retryDelay(int failures) {
        return Duration.ofSeconds(Math.min(1L << Math.min(failures - 1, 5), MAX_RETRY_SECONDS));
    }

    /** Waits that long, or until the relay stops. */
    private void pause(Duration duration) {
        try {
            this.stopping.await(duration.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public synchronized void start() {
        if (!tableExists()) {
            logger.info("No outbox_event table in the service's schema: the outbox relay is off. Create it from the"
                    + " library's schema-postgresql.sql (or let the library migrate it with Flyway) to emit events");
            return;
        }
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

    /** Whether the table exists; assumed so when the database cannot say (the runs then report what is wrong). */
    private boolean tableExists() {
        try {
            return OutboxBacklog.tableExists(this.jdbc);
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
                // A run under way gets a moment to finish. One that does not (waiting for a connection of a database
                // that is away, for the broker's confirms) is abandoned with the daemon thread: its transaction never
                // commits, so its rows stay unpublished, and the next relay publishes them (again, if they went out).
                thread.join(STOP_WAIT.toMillis());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
            this.thread = null;
        }
    }

    @Override
    public synchronized boolean isRunning() {
        return this.running;
    }
}
