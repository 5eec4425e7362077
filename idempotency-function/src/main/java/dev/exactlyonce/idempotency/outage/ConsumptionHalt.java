package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutageClassifier;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.DatabaseProbe;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.context.SmartLifecycle;
import org.springframework.messaging.Message;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * Halts consumption of every guarded binding while what they depend on is unavailable: the first outage halts (one WARN
 * line, a probe thread); each consumer thread holds its message at most {@code max-hold} per delivery, then gives it
 * back (at once where {@link PausedBindings} pauses the binding; where the broker counts returns, the first hold to run
 * out stops the binding, and its held messages go back as it stops); the probe tries a write at intervals doubling up
 * to {@code probe-max-interval}; once one goes through, one message goes first, and its commit resumes consumption. See
 * docs/operations.md, "When things go wrong".
 */
public final class ConsumptionHalt implements SmartLifecycle, DisposableBean {

    /** A halt in progress: since when, and why (the failure met last). */
    public record Halt(Instant since, String cause) {}

    private static final Logger logger = LoggerFactory.getLogger(ConsumptionHalt.class);

    private static final AtomicInteger instances = new AtomicInteger();

    /** How long a hold lasts at most once the service stops ({@link #stop()}). */
    static final Duration HOLD_WHILE_STOPPING = Duration.ofSeconds(1);

    /** How often a lasting halt is logged at INFO; halts closer than this count as one on the halted gauge. */
    private static final Duration REPORT_EVERY = Duration.ofMinutes(1);

    /** How often a hold looks whether the probe began stopping its binding. */
    private static final Duration STOP_POLL = Duration.ofMillis(100);

    private final DatabaseProbe probe;

    private final OutageClassifier classifier;

    private final IdempotencyProperties.Outage settings;

    private final IdempotencyMetrics metrics;

    private final PausedBindings pausing;

    /** A name of its own: a thread dump tells whose probe it is. */
    private final String probeThreadName = "idempotency-outage-probe-" + instances.incrementAndGet();

    private final List<String> bindingNames = new CopyOnWriteArrayList<>();

    private final DeliveryHold holds;

    private final Object lock = new Object();

    private volatile @Nullable Halt halt;

    private volatile @Nullable Thread probeThread;

    /** Whether one message may go through to try the database, the probe having found it answering. */
    private boolean trial;

    private boolean trialTaken;

    /** When it took it, in {@link System#nanoTime()}. */
    private long trialTakenAt;

    private @Nullable Thread trialThread;

    private boolean trialFailed;

    private @Nullable Throwable trialFailure;

    /** When the halt's state was last logged at INFO or above, in {@link System#nanoTime()}. */
    private long lastReported;

    private volatile boolean running;

    /** Set when the application stops: the probe ends, no new halt begins, holds are cut short. */
    private volatile boolean stopped;

    /** When it stopped, in {@link System#nanoTime()}. */
    private volatile long stoppedAt;

    /** Set when the context closes, after every binding stopped: every hold ends. */
    private volatile boolean closed;

    private Duration lastInterval;

    private Instant lastResumed = Instant.EPOCH;

    /** The start of the halt in progress, or of the first of the halts it follows within a minute of each other. */
    private Instant countedFrom = Instant.EPOCH;

    public ConsumptionHalt(
            DatabaseProbe probe,
            OutageClassifier classifier,
            IdempotencyProperties.Outage settings,
            IdempotencyMetrics metrics,
            PausedBindings pausing) {
        this.probe = probe;
        this.classifier = classifier;
        this.settings = settings;
        this.metrics = metrics;
        this.pausing = pausing;
        this.holds = new DeliveryHold(settings.maxHold());
        this.lastInterval = settings.probeInitialInterval();
    }

    /** @param countsReturns whether the binding's broker counts each return of a delivery (RabbitMQ's quorum queues) */
    public void register(String bindingName, boolean countsReturns) {
        this.bindingNames.add(bindingName);
        if (countsReturns) {
            this.pausing.countsReturns(bindingName);
        }
    }

    String probeThreadName() {
        return this.probeThreadName;
    }

    public List<String> bindingNames() {
        return List.copyOf(this.bindingNames);
    }

    public boolean isOutage(Throwable failure) {
        return this.classifier.isOutage(failure);
    }

    /** Whether the probe's write fails now; a claim that failed while it goes through failed for its message. */
    public boolean failsTheGuardsWrite() {
        return this.probe.check() != null;
    }

    void givenBack() {
        this.metrics.givenBack();
    }

    /** How long a statement of a message's transaction waits for the database's answer: 0 without limit. */
    public Duration socketTimeout() {
        return this.settings.socketTimeout();
    }

    /** How long a consumer thread holds a message before it gives it back to the broker. */
    public Duration maxHold() {
        return this.settings.maxHold();
    }

    /** Starts a delivery's hold at its first attempt on this thread; its retries (same source or payload) share it. */
    public void beginDelivery(Message<?> message) {
        this.holds.begin(message);
    }

    /** The delivery this thread was on ended (committed, or given back): its next message is a new delivery. */
    public void endDelivery() {
        this.holds.end();
    }

    /** What is left of the delivery's {@code max-hold}: none where the binder pauses the binding instead. */
    public Duration holdLeft(String bindingName) {
        return this.pausing.isPausable(bindingName) ? Duration.ZERO : holdLeft();
    }

    /** How long the delivery this thread is on may still be held: {@code max-hold} when none began. */
    public Duration holdLeft() {
        return this.holds.left();
    }

    /** The halt in progress, if any. */
    @Nullable
    public Halt halt() {
        return this.halt;
    }

    @Override
    public void start() {
        this.stopped = false;
        this.running = true;
        if (this.halt != null) {
            // Started again while halted: a probe takes over from the one stop() ended.
            startProbeFrom(this.settings.probeInitialInterval());
        }
    }

    /**
     * Stops before the bindings do: the probe ends, and holds end {@link #HOLD_WHILE_STOPPING} later, so that a message
     * given back does not come straight back to a consumer still consuming, nor waits out its container's shutdown.
     */
    @Override
    public void stop() {
        this.stoppedAt = System.nanoTime();
        this.stopped = true;
        this.running = false;
        Thread probe = this.probeThread;
        if (probe != null) {
            probe.interrupt();
        }
        synchronized (this.lock) {
            this.lock.notifyAll();
        }
    }

    /** The context closes, every binding stopped: the threads still holding messages let them go. */
    @Override
    public void destroy() {
        this.closed = true;
        synchronized (this.lock) {
            this.lock.notifyAll();
        }
    }

    /** Whether the service is stopping: a failure then halts nothing, and nothing is held long. */
    public boolean isStopping() {
        return this.stopped;
    }

    @Override
    public boolean isRunning() {
        return this.running;
    }

    @Override
    public int getPhase() {
        return Integer.MAX_VALUE;
    }

    /** Halts consumption, unless it is halted already; a trial's message that meets it again fails the trial. */
    public void onOutage(Throwable failure) {
        if (Failures.find(failure, OutageException.class) != null) {
            // A message given back after its hold ran out: nothing new about the database.
            return;
        }
        // Set when this failure begins a halt.
        @Nullable BackOffExecution intervals = null;
        Duration firstInterval = Duration.ZERO;
        Instant countedFrom = Instant.EPOCH;
        boolean trialFailedNow = false;
        synchronized (this.lock) {
            if (this.trial) {
                trialFailedNow = !this.trialFailed;
                this.trialFailed = true;
                this.trialFailure = failure;
                this.lock.notifyAll();
            } else if (this.halt == null && !this.stopped) {
                Instant now = Instant.now();
                this.halt = new Halt(now, describe(failure));
                this.lastReported = System.nanoTime();
                Duration running = Duration.between(this.lastResumed, now);
                boolean soonAfterTheLast = running.compareTo(this.settings.probeMaxInterval()) <= 0;
                intervals = probeIntervals(
                        soonAfterTheLast ? this.lastInterval : this.settings.probeInitialInterval(), this.settings);
                if (soonAfterTheLast) {
                    // A halt within probe-max-interval of the last resume: a dependency other than the database is
                    // likely still down, so the probe goes on past the interval the last halt reached.
                    intervals.nextBackOff();
                }
                firstInterval = Duration.ofMillis(intervals.nextBackOff());
                // Halts that flap show on the gauge as one that lasts.
                countedFrom = running.compareTo(REPORT_EVERY) <= 0 ? this.countedFrom : now;
                this.countedFrom = countedFrom;
            }
        }
        if (trialFailedNow) {
            this.metrics.trialFailed();
        }
        if (intervals == null) {
            return;
        }
        logger.warn(
                "Consumption of the guarded bindings {} halts: a dependency is unavailable ({}). Their messages are"
                        + " held, not dead-lettered, until the database answers again; next check in {}",
                this.bindingNames,
                describe(failure),
                firstInterval);
        this.metrics.halted(countedFrom);
        // Connections opened before the failure (to a server since demoted to read-only, say) are not handed out again.
        this.probe.evictConnectionsIfStale(failure);
        try {
            startProbe(intervals, firstInterval);
        } catch (RuntimeException | Error ex) {
            synchronized (this.lock) {
                this.halt = null;
                this.lock.notifyAll();
            }
            throw ex;
        }
    }

    private void startProbeFrom(Duration first) {
        BackOffExecution intervals = probeIntervals(first, this.settings);
        startProbe(intervals, Duration.ofMillis(intervals.nextBackOff()));
    }

    private void startProbe(BackOffExecution intervals, Duration firstInterval) {
        Thread previous = this.probeThread;
        if (previous != null) {
            previous.interrupt();
        }
        Thread probe = new Thread(() -> probe(intervals, firstInterval), this.probeThreadName);
        probe.setDaemon(true);
        this.probeThread = probe;
        probe.start();
    }

    /**
     * Waits while halted, at most the hold left; once the probe's write passes, the first thread takes the trial.
     *
     * @return whether consumption may go on: {@code false} when the hold ran out, on stopping, or once closed
     */
    public boolean awaitEnd(String bindingName) {
        return await(bindingName, true);
    }

    /** Holds a message that met the outage until the probe's write goes through (then tried again) or the hold ends. */
    boolean awaitAnswer(String bindingName) {
        return await(bindingName, false);
    }

    /**
     * Where the broker counts returns, a hold that runs out first asks the probe to stop the binding, and every hold of
     * the binding ends {@link #HOLD_WHILE_STOPPING} after, so that none is handed straight back.
     */
    private boolean await(String bindingName, boolean takesTheTrial) {
        if (this.halt == null) {
            return true;
        }
        long entered = System.nanoTime();
        long deadline = entered + holdLeft(bindingName).toNanos();
        synchronized (this.lock) {
            while (this.halt != null) {
                if (this.closed) {
                    return false;
                }
                if (this.trial && !this.trialTaken) {
                    this.trialTaken = takesTheTrial;
                    this.trialTakenAt = System.nanoTime();
                    if (takesTheTrial) {
                        this.trialThread = Thread.currentThread();
                    }
                    return true;
                }
                restartProbeIfItDied();
                long until = deadline;
                if (this.stopped) {
                    until = Math.min(until, Math.max(this.stoppedAt, entered) + HOLD_WHILE_STOPPING.toNanos());
                }
                Long stopRequested = this.pausing.stopRequestedAt(bindingName);
                Long stopBegan = this.pausing.stopBeganAt(bindingName);
                if (stopBegan != null && !this.stopped) {
                    until = Math.max(stopBegan, entered) + HOLD_WHILE_STOPPING.toNanos();
                } else if (stopRequested != null && !this.stopped) {
                    // Held until the probe begins stopping the binding (it may be in a check): given back before, the
                    // message would come straight back to a consumer still consuming.
                    until = System.nanoTime() + STOP_POLL.toNanos();
                }
                long left = until - System.nanoTime();
                if (left <= 0
                        && stopRequested == null
                        && !this.stopped
                        && this.pausing.stopTakingDeliveries(bindingName)) {
                    // The probe stops the binding; this hold ends a moment later.
                    this.lock.notifyAll();
                    continue;
                }
                if (left <= 0 && (stopRequested == null || stopBegan != null || this.stopped)) {
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

    /** A probe killed by an {@link Error} is started again by a thread holding a message. Called holding the lock. */
    private void restartProbeIfItDied() {
        Thread probe = this.probeThread;
        if (this.stopped || this.closed || (probe != null && probe.getState() != Thread.State.TERMINATED)) {
            return;
        }
        logger.warn(
                "The outage probe of the guarded bindings {} ended while they are halted; it starts again",
                this.bindingNames);
        startProbeFrom(this.lastInterval);
    }

    /** A message ended before its claim (rejected): a trial it took is left to the next message. */
    public void untried() {
        if (this.halt == null) {
            return;
        }
        synchronized (this.lock) {
            if (this.trial && this.trialTaken && this.trialThread == Thread.currentThread()) {
                this.trialTaken = false;
                this.trialThread = null;
                this.lock.notifyAll();
            }
        }
    }

    /** A message's transaction committed, or failed for a reason of its own: the database works. */
    public void onSuccess() {
        if (this.halt == null) {
            return;
        }
        synchronized (this.lock) {
            if (this.trial) {
                resume(this.lastInterval);
            }
        }
    }

    private void probe(BackOffExecution intervals, Duration firstInterval) {
        Duration interval = firstInterval;
        boolean trialFailedBefore = false;
        // The probe alone pauses and resumes the bindings the binder can pause, so that a pause never lands after the
        // halt ended; never while holding the lock (a binding's pause and stop share the binding's monitor).
        pauseWhileHalted();
        // Only the latest probe goes on: one that stop() interrupted, or that another replaced, ends.
        while (!this.stopped && Thread.currentThread() == this.probeThread && waitForNextCheck(interval)) {
            try {
                Throwable failure = this.probe.check();
                if (failure == null) {
                    if (tryOneMessage(interval)) {
                        this.pausing.resume();
                        return;
                    }
                    pauseWhileHalted();
                    failure = trialFailure();
                    if (!trialFailedBefore) {
                        trialFailedBefore = true;
                        logger.warn("The database answers the outage probe's write, but the first message tried met the"
                                + " outage again: consumption stays halted, and one message is tried after"
                                + " each probe that passes");
                    }
                }
                stillHalted(failure, interval);
            } catch (RuntimeException | Error ex) {
                // The probe goes on whatever fails in it: only a resume or the service stopping ends it.
                logger.debug("The outage probe failed; next check in {}", interval, ex);
            }
            interval = Duration.ofMillis(intervals.nextBackOff());
        }
    }

    private Throwable trialFailure() {
        synchronized (this.lock) {
            Throwable failure = this.trialFailure;
            return failure != null
                    ? failure
                    : new IllegalStateException("the message tried gave no outcome within " + this.settings.maxHold());
        }
    }

    /** The halt goes on with that cause, logged at INFO once every {@link #REPORT_EVERY}, else at DEBUG. */
    private void stillHalted(Throwable met, Duration interval) {
        String failure = describe(met);
        Halt current;
        boolean report;
        synchronized (this.lock) {
            current = this.halt;
            if (current == null || Thread.currentThread() != this.probeThread) {
                return;
            }
            long now = System.nanoTime();
            report = now - this.lastReported >= REPORT_EVERY.toNanos();
            if (report) {
                this.lastReported = now;
            }
            this.halt = new Halt(current.since(), failure);
        }
        Duration halted = Duration.between(current.since(), Instant.now()).withNanos(0);
        if (report) {
            logger.info(
                    "Consumption of the guarded bindings {} is still halted, for {} now: {}; next check in {}",
                    this.bindingNames,
                    halted,
                    failure,
                    interval);
        } else {
            logger.debug("The database does not work yet ({}); next check in {}", failure, interval);
        }
    }

    /** Pauses the bindings the binder can pause, if this is still the probe of a halt in progress. */
    private void pauseWhileHalted() {
        synchronized (this.lock) {
            if (Thread.currentThread() != this.probeThread || this.halt == null || this.stopped) {
                return;
            }
        }
        this.pausing.pause(this.bindingNames);
    }

    /** Lets one message through; {@code true} once resumed, also when none comes within {@code probe-max-interval}. */
    private boolean tryOneMessage(Duration interval) {
        synchronized (this.lock) {
            if (Thread.currentThread() != this.probeThread || this.halt == null) {
                return this.halt == null;
            }
            this.lastInterval = interval;
            this.trial = true;
            this.trialTaken = false;
            this.trialFailed = false;
            this.trialFailure = null;
            this.lock.notifyAll();
        }
        this.pausing.resume();
        synchronized (this.lock) {
            long untried = System.nanoTime() + this.settings.probeMaxInterval().toNanos();
            while (this.halt != null && !this.trialFailed && !this.stopped) {
                long left = untried - System.nanoTime();
                if (!this.trialTaken && left <= 0) {
                    resume(interval);
                    break;
                }
                if (this.trialTaken
                        && System.nanoTime() - this.trialTakenAt
                                > this.settings.maxHold().toNanos()) {
                    // No outcome within max-hold (a hung thread, an Error): counted as a failure, another may try.
                    logger.debug(
                            "The message tried gave no outcome within {}; another one is tried",
                            this.settings.maxHold());
                    break;
                }
                try {
                    this.lock.wait(this.trialTaken ? 100 : Math.max(1, left / 1_000_000));
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            boolean resumed = this.halt == null;
            this.trial = false;
            this.trialTaken = false;
            this.trialThread = null;
            return resumed;
        }
    }

    /** Ends the halt; called holding the lock. */
    private void resume(Duration interval) {
        Halt ended = this.halt;
        if (ended == null) {
            return;
        }
        this.halt = null;
        this.trial = false;
        this.lastResumed = Instant.now();
        this.lastInterval = interval;
        Duration halted = Duration.between(ended.since(), this.lastResumed);
        this.lock.notifyAll();
        logger.info("Consumption of the guarded bindings {} resumes after {} halted", this.bindingNames, halted);
        this.metrics.resumed(halted);
    }

    /** The probe's intervals: {@code first}, then twice as long each time, up to {@code probe-max-interval}. */
    static BackOffExecution probeIntervals(Duration first, IdempotencyProperties.Outage settings) {
        ExponentialBackOff intervals = new ExponentialBackOff(Math.max(1, first.toMillis()), 2);
        intervals.setMaxInterval(settings.probeMaxInterval().toMillis());
        return intervals.start();
    }

    private static String describe(Throwable failure) {
        Throwable real = Failures.real(failure);
        if (real instanceof OutageMet met && met.getCause() != null) {
            real = met.getCause();
        }
        Throwable root = Failures.root(real);
        return root == real ? String.valueOf(real) : real + ", caused by " + root;
    }

    /** Waits for the next check, pausing or stopping bindings meanwhile; {@code false} once stopped or replaced. */
    private boolean waitForNextCheck(Duration interval) {
        long until = System.nanoTime() + interval.toNanos();
        while (true) {
            try {
                pauseWhileHalted();
            } catch (RuntimeException | Error ex) {
                logger.debug("Could not pause or stop the guarded bindings; tried again at the next check", ex);
            }
            synchronized (this.lock) {
                if (this.stopped || Thread.currentThread() != this.probeThread) {
                    return false;
                }
                long left = until - System.nanoTime();
                if (left <= 0) {
                    return true;
                }
                try {
                    // Woken when a hold asks that its binding stop taking deliveries (and by every other change).
                    this.lock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
    }
}
