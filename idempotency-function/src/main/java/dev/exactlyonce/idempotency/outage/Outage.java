package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutageClassifier;
import dev.exactlyonce.idempotency.internal.BatchMessages;
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
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.messaging.Message;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * An outage of what the guarded bindings depend on, shared by every guarded binding of the service:
 *
 * <ol>
 *   <li>the first failure classified as an outage ({@link OutageClassifier}) halts consumption: one WARN line with
 *       the cause and the bindings, the halt meter, and a probe thread;
 *   <li>while it lasts, every consumer thread of a guarded binding holds the message it is about to process, before
 *       its transaction begins ({@link #awaitEnd(String)}), so nothing touches the database and no attempt is used
 *       up; so is a message whose transaction could not begin, or whose claim met the outage (its transaction is begun
 *       again afterwards, in the same attempt); a message whose attempt failed with the outage later on is held the
 *       same way in its error path ({@link OutageGiveBack}) and tried again in place, instead of being dead-lettered.
 *       A delivery is held {@code max-hold} in all, counted from its first attempt ({@link #holdLeft()}), however many
 *       of its attempts wait, then given back to the broker to be delivered again. Where the broker counts each return
 *       of a delivery (RabbitMQ's quorum queues), the binding then stops taking deliveries until the probe finds the
 *       database answering ({@link PausedBindings}). Where the binder can pause a binding (Kafka, single-message
 *       bindings), the probe pauses the binding instead and its messages are given back at once: the consumer goes on
 *       polling, and nothing is held;
 *   <li>the probe checks the condition that failed, a write ({@link DatabaseProbe}), after
 *       {@code probe-initial-interval}, then at intervals that double up to {@code probe-max-interval};
 *   <li>once a write goes through, the paused bindings resume and one message goes first: one consumer thread takes
 *       it, the others keep holding theirs. If it commits (or fails for a reason of its own), consumption resumes:
 *       one INFO line with how long it was halted, and the time on the halt timer. If it meets the outage again, the
 *       halt goes on, and so does the probe (the paused bindings paused again), without a second halt: a server that
 *       answers the probe but not the message costs one message at a time, not every held one. When no message comes
 *       to try it within {@code probe-max-interval}, consumption resumes all the same. A halt that follows the
 *       previous one closely (a dependency other than the database, still down) starts probing at the interval the
 *       previous one reached.
 * </ol>
 */
public final class Outage implements SmartLifecycle, DisposableBean {

    /** A halt in progress: since when, and why (the failure met last). */
    public record Halt(Instant since, String cause) {}

    /** The delivery a consumer thread is on (by identity), and when its hold must end, in {@link System#nanoTime()}. */
    private record Delivery(Object key, long deadline) {}

    private static final Logger logger = LoggerFactory.getLogger(Outage.class);

    private static final AtomicInteger instances = new AtomicInteger();

    /**
     * How long a delivery is held at most once the service stops, counted from when it stopped or from the delivery,
     * whichever is later: long enough that a message given back is not handed straight back to a consumer still
     * consuming, again and again; short enough that the stopping containers do not wait out their shutdown timeouts.
     */
    static final Duration HOLD_WHILE_STOPPING = Duration.ofSeconds(1);

    /**
     * How often a halt whose cause stays the same is logged at INFO; and how soon after a resume a new halt is counted,
     * on the halted gauge, from the start of the one before.
     */
    private static final Duration REPORT_EVERY = Duration.ofMinutes(1);

    /** How often a hold looks whether the probe began stopping its binding. */
    private static final Duration STOP_POLL = Duration.ofMillis(100);

    private final DatabaseProbe probe;

    private final OutageClassifier classifier;

    private final IdempotencyProperties.Outage settings;

    private final IdempotencyMetrics metrics;

    private final PausedBindings pausing;

    /** Its probe threads' name, one of its own: a thread dump (or a test's log capture) tells whose probe it is. */
    private final String probeThreadName = "idempotency-outage-probe-" + instances.incrementAndGet();

    private final List<String> bindingNames = new CopyOnWriteArrayList<>();

    private final ThreadLocal<Delivery> delivery = new ThreadLocal<>();

    private final Object lock = new Object();

    private volatile @Nullable Halt halt;

    private volatile @Nullable Thread probeThread;

    /** Whether one message may go through to try the database, the probe having found it answering. */
    private boolean trial;

    /** Whether a consumer thread took the trial's message. */
    private boolean trialTaken;

    /** When it took it, in {@link System#nanoTime()}. */
    private long trialTakenAt;

    /** The thread that took it. */
    private @Nullable Thread trialThread;

    /** Whether the trial's message met the outage again. */
    private boolean trialFailed;

    /** What the trial's message met, when it met the outage again. */
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

    public Outage(
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
        this.lastInterval = settings.probeInitialInterval();
    }

    /**
     * @param countsReturns whether the binding's broker counts each return of a delivery (RabbitMQ's quorum queues,
     *     against their delivery limit): the binding then stops taking deliveries once it gave one back, until the
     *     probe finds the database answering
     */
    public void guard(String bindingName, boolean countsReturns) {
        this.bindingNames.add(bindingName);
        if (countsReturns) {
            this.pausing.countsReturns(bindingName);
        }
    }

    String probeThreadName() {
        return this.probeThreadName;
    }

    /** The guarded bindings whose consumption an outage halts. */
    public List<String> bindingNames() {
        return List.copyOf(this.bindingNames);
    }

    public boolean isOutage(Throwable failure) {
        return this.classifier.isOutage(failure);
    }

    /**
     * Whether the database fails the guard's own write now: the probe's claim, of an id of its own, in a transaction
     * it rolls back. A claim that failed while the probe's goes through failed for its message (an id whose partition
     * is not made yet, say).
     */
    public boolean failsTheGuardsWrite() {
        return this.probe.check() != null;
    }

    /** A delivery is given back to the broker, to be delivered again. */
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

    /**
     * Starts counting the hold of a delivery, at its first attempt on this thread; its later attempts, and its
     * give-back, share the deadline. A delivery is told from the next by the message the binder received
     * ({@code sourceData}: the AMQP message, or a batch's list of them), else by the payload (the Kafka binder's),
     * which a binder's retries pass on as it is. It ends when an attempt commits or the delivery is given back.
     */
    public void delivering(Message<?> message) {
        if (BatchMessages.isPartOfBatch(message)) {
            // A message of a batch tried alone, on the batch's thread: the batch's delivery, and its deadline.
            return;
        }
        Object source = message.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA);
        Object key = source != null ? source : message.getPayload();
        Delivery current = this.delivery.get();
        if (current == null || current.key() != key) {
            this.delivery.set(new Delivery(
                    key, System.nanoTime() + this.settings.maxHold().toNanos()));
        }
    }

    /** The delivery this thread was on ended (committed, or given back): its next message is a new delivery. */
    public void delivered() {
        this.delivery.remove();
    }

    /**
     * How long a delivery of the binding may still be held: none where the binder pauses the binding during an
     * outage (its consumer goes on polling, and the message is given back at once), else what is left of
     * {@code max-hold}.
     */
    public Duration holdLeft(String bindingName) {
        return this.pausing.isPausable(bindingName) ? Duration.ZERO : holdLeft();
    }

    /** How long the delivery this thread is on may still be held: {@code max-hold} when none began. */
    public Duration holdLeft() {
        Delivery current = this.delivery.get();
        if (current == null) {
            return this.settings.maxHold();
        }
        return Duration.ofNanos(Math.max(0, current.deadline() - System.nanoTime()));
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
            // Started again while halted (a context stopped and started): a probe takes over from the one stop() ended.
            startProbeFrom(this.settings.probeInitialInterval());
        }
    }

    /**
     * Stops before the bindings do (the highest phase): the probe ends. The threads holding messages, and those that
     * take a message meanwhile, hold it {@link #HOLD_WHILE_STOPPING} more, then give it back: given back at once while
     * its consumer still consumes, the broker would deliver it to that consumer again at once, again and again until the
     * binding stops (each a delivery a quorum queue may count against its limit); held until the container gave up, the
     * service would wait out each container's shutdown timeout.
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
    public void detected(Throwable failure) {
        if (Failures.find(failure, OutageException.class) != null) {
            // A message given back after its hold ran out: nothing new about the database, no new halt, no failed
            // trial.
            return;
        }
        BackOffExecution intervals = null;
        Duration firstInterval = Duration.ZERO;
        Instant countedFrom = Instant.EPOCH;
        boolean trialFailedNow = false;
        boolean halts = false;
        synchronized (this.lock) {
            if (this.trial) {
                trialFailedNow = !this.trialFailed;
                this.trialFailed = true;
                this.trialFailure = failure;
                this.lock.notifyAll();
            } else if (this.halt == null && !this.stopped) {
                halts = true;
                Instant now = Instant.now();
                this.halt = new Halt(now, describe(failure));
                this.lastReported = System.nanoTime();
                Duration running = Duration.between(this.lastResumed, now);
                boolean soonAfterTheLast = running.compareTo(this.settings.probeMaxInterval()) <= 0;
                intervals = probeIntervals(
                        soonAfterTheLast ? this.lastInterval : this.settings.probeInitialInterval(), this.settings);
                if (soonAfterTheLast) {
                    // Past the interval the last halt reached.
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
        if (!halts || intervals == null) {
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

    /** Starts a probe whose first check is {@code first} from now. */
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
     * Waits while consumption is halted, at most what is left of the delivery's hold ({@link #holdLeft(String)}),
     * before a message of the binding is processed. Once the probe finds the database answering, the first thread to
     * ask goes on, with the trial's message; the others wait for its outcome.
     *
     * @return whether consumption may go on: {@code false} when still halted once the hold ran out, or after
     *     {@link #HOLD_WHILE_STOPPING} once the application stops or the binding stops taking deliveries, or when its
     *     context closes
     */
    public boolean awaitEnd(String bindingName) {
        return await(bindingName, true);
    }

    /**
     * Waits, at most what is left of the delivery's hold, while consumption is halted and the probe has not found the
     * database answering: a message that met the outage is held so, then tried again, or given back.
     */
    boolean awaitAnswer(String bindingName) {
        return await(bindingName, false);
    }

    /**
     * Where the binding's broker counts each return of a delivery, a hold that runs out first asks that the binding
     * stop taking deliveries, and holds {@link #HOLD_WHILE_STOPPING} more, as every other hold of the binding then
     * does: the probe cancels the binding's consumers meanwhile, so the messages given back then are not handed straight
     * back to them, again and again.
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

    /**
     * Starts a probe again if the halt's probe died (an {@link Error} where nothing could catch it): a consumer thread
     * that holds a message sees it, and the halt does not outlast it. Called holding the lock.
     */
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

    /**
     * A message ended without reaching the database (rejected before its claim): if it took the trial, the trial is
     * left to the next message.
     */
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
    public void worked() {
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

    /**
     * The halt goes on for that failure: it becomes the halt's cause (health's), and is logged at INFO once every
     * {@link #REPORT_EVERY}, at DEBUG otherwise.
     */
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

    /**
     * Lets one message through and waits for its outcome; {@code true} once consumption resumed. With no message to
     * try it within {@code probe-max-interval}, consumption resumes all the same: the write went through. The paused
     * bindings deliver again once the trial is open.
     */
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
                    // No outcome within max-hold: its thread hangs, or an Error took it past the library's callbacks.
                    // Counted as meeting the outage again, so that another message may try.
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
        ExponentialBackOff intervals = new ExponentialBackOff(first.toMillis(), 2);
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

    /**
     * The probe's back-off: it runs on a thread of its own, started when consumption halts, that has nothing else to
     * do until the next check but stop the bindings asked to stop taking deliveries meanwhile; {@code false} when
     * interrupted (the service stops), or replaced.
     */
    private boolean waitForNextCheck(Duration interval) {
        long until = System.nanoTime() + interval.toNanos();
        while (true) {
            try {
                pauseWhileHalted();
            } catch (RuntimeException | Error ex) {
                // The probe goes on whatever fails in it: only a resume or the service stopping ends it.
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
