package dev.exactlyonce.idempotency;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * An outage of what the guarded bindings depend on, shared by every guarded binding of the service:
 *
 * <ol>
 *   <li>the first failure classified as an outage ({@link OutageClassifier}) halts consumption: one WARN line with
 *       the cause and the bindings, the halt meter, and a probe thread;
 *   <li>while it lasts, every consumer thread of a guarded binding holds the message it is about to process, before
 *       its transaction begins ({@link #awaitEnd(Duration)}), so nothing touches the database and no attempt is used
 *       up; a message whose attempt failed with the outage is held the same way in its error path instead of being
 *       dead-lettered, then given back to the broker to be delivered again;
 *   <li>the probe takes a connection of the DataSource after {@code probe-initial-interval}, then at intervals that
 *       double up to {@code probe-max-interval}; once it gets one, consumption resumes: one INFO line with how long it
 *       was halted, and the time on the halt timer. A halt that follows the previous one closely (a dependency other
 *       than the database, still down) starts probing at the interval the previous one reached.
 * </ol>
 */
final class Outage implements SmartLifecycle {

    /** A halt in progress: since when, and why. */
    record Halt(Instant since, String cause) {}

    private static final Logger logger = LoggerFactory.getLogger(Outage.class);

    private final DataSource dataSource;

    private final OutageClassifier classifier;

    private final IdempotencyProperties.Outage settings;

    private final IdempotencyMetrics metrics;

    private final List<String> bindingNames = new CopyOnWriteArrayList<>();

    private final Object lock = new Object();

    private volatile @Nullable Halt halt;

    private volatile @Nullable Thread probe;

    private volatile boolean running;

    /** Set when the application stops: holds end, no new halt begins. */
    private volatile boolean stopped;

    private Duration lastInterval;

    private Instant lastResumed = Instant.EPOCH;

    Outage(
            DataSource dataSource,
            OutageClassifier classifier,
            IdempotencyProperties.Outage settings,
            IdempotencyMetrics metrics) {
        this.dataSource = dataSource;
        this.classifier = classifier;
        this.settings = settings;
        this.metrics = metrics;
        this.lastInterval = settings.probeInitialInterval();
    }

    void guard(String bindingName) {
        this.bindingNames.add(bindingName);
    }

    /** The guarded bindings whose consumption an outage halts. */
    List<String> bindingNames() {
        return List.copyOf(this.bindingNames);
    }

    boolean isOutage(Throwable failure) {
        return this.classifier.isOutage(failure);
    }

    /** How long a consumer thread holds a message before it gives it back to the broker. */
    Duration maxHold() {
        return this.settings.maxHold();
    }

    /** The halt in progress, if any. */
    @Nullable
    Halt halt() {
        return this.halt;
    }

    @Override
    public void start() {
        this.stopped = false;
        this.running = true;
    }

    /**
     * Stops before the bindings do (the highest phase): the threads holding messages give them back at once, and the
     * probe ends, so that the containers stop without waiting out a hold.
     */
    @Override
    public void stop() {
        this.stopped = true;
        this.running = false;
        Thread probe = this.probe;
        if (probe != null) {
            probe.interrupt();
        }
        synchronized (this.lock) {
            this.lock.notifyAll();
        }
    }

    @Override
    public boolean isRunning() {
        return this.running;
    }

    @Override
    public int getPhase() {
        return Integer.MAX_VALUE;
    }

    /** Halts consumption, unless it is halted already. */
    void detected(Throwable failure) {
        Duration firstInterval;
        synchronized (this.lock) {
            if (this.halt != null || this.stopped) {
                return;
            }
            Instant now = Instant.now();
            this.halt = new Halt(now, describe(failure));
            boolean soonAfterTheLast =
                    Duration.between(this.lastResumed, now).compareTo(this.settings.probeMaxInterval()) <= 0;
            firstInterval = soonAfterTheLast ? longer(this.lastInterval) : this.settings.probeInitialInterval();
        }
        logger.warn(
                "Consumption of the guarded bindings {} halts: a dependency is unavailable ({}). Their messages are"
                        + " held, not dead-lettered, until the database answers again; next check in {}",
                this.bindingNames,
                describe(failure),
                firstInterval);
        this.metrics.halted();
        Thread probe = new Thread(() -> probe(firstInterval), "idempotency-outage-probe");
        probe.setDaemon(true);
        this.probe = probe;
        try {
            probe.start();
        } catch (RuntimeException | Error ex) {
            synchronized (this.lock) {
                this.halt = null;
                this.lock.notifyAll();
            }
            throw ex;
        }
    }

    /**
     * Waits while consumption is halted, at most {@code max}.
     *
     * @return whether consumption may go on: {@code false} when still halted after {@code max}, or when the
     *     application stops meanwhile
     */
    boolean awaitEnd(Duration max) {
        if (this.halt == null) {
            return true;
        }
        long deadline = System.nanoTime() + max.toNanos();
        synchronized (this.lock) {
            while (this.halt != null) {
                if (this.stopped) {
                    return false;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    this.lock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return true;
        }
    }

    private void probe(Duration firstInterval) {
        Duration interval = firstInterval;
        while (!this.stopped && sleep(interval)) {
            String failure = check();
            if (failure == null) {
                resume(interval);
                return;
            }
            logger.debug("The database does not answer yet ({}); next check in {}", failure, interval);
            interval = longer(interval);
        }
    }

    /** {@code null} when the database answers, else why it does not. */
    private @Nullable String check() {
        try (Connection connection = this.dataSource.getConnection()) {
            return connection.isValid(2) ? null : "the connection is not valid";
        } catch (SQLException | RuntimeException ex) {
            return ex.getMessage();
        }
    }

    private void resume(Duration interval) {
        Duration halted;
        synchronized (this.lock) {
            Halt ended = this.halt;
            this.halt = null;
            this.lastResumed = Instant.now();
            this.lastInterval = interval;
            halted = ended != null ? Duration.between(ended.since(), this.lastResumed) : Duration.ZERO;
            this.lock.notifyAll();
        }
        logger.info("Consumption of the guarded bindings {} resumes after {} halted", this.bindingNames, halted);
        this.metrics.resumed(halted);
    }

    private Duration longer(Duration interval) {
        Duration doubled = interval.multipliedBy(2);
        return doubled.compareTo(this.settings.probeMaxInterval()) > 0 ? this.settings.probeMaxInterval() : doubled;
    }

    private static String describe(Throwable failure) {
        Throwable real = Failures.real(failure);
        Throwable root = real;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root == real ? String.valueOf(real) : real + ", caused by " + root;
    }

    /**
     * The probe's back-off: it runs on a thread of its own, started when consumption halts, that has nothing else to
     * do until the next check; {@code false} when interrupted (the service stops).
     */
    private static boolean sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
            return true;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
