package dev.exactlyonce.idempotency.internal;

import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/** Runs a task of the library (the purge, the partition maintenance) on a thread of its own, at a fixed delay. */
public final class PeriodicTask implements SmartLifecycle {

    private static final Logger logger = LoggerFactory.getLogger(PeriodicTask.class);

    private final String name;

    private final Runnable task;

    private final Duration initialDelay;

    private final Duration interval;

    private @Nullable ScheduledExecutorService executor;

    public PeriodicTask(String name, Runnable task, Duration initialDelay, Duration interval) {
        this.name = name;
        this.task = task;
        this.initialDelay = initialDelay;
        this.interval = interval;
    }

    @Override
    public synchronized void start() {
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, this.name);
            thread.setDaemon(true);
            return thread;
        });
        executor.scheduleWithFixedDelay(
                this::runSafely, this.initialDelay.toMillis(), this.interval.toMillis(), TimeUnit.MILLISECONDS);
        this.executor = executor;
        logger.info("Scheduled {} every {}, first in {}", this.name, this.interval, this.initialDelay);
    }

    @Override
    public synchronized void stop() {
        if (this.executor != null) {
            this.executor.shutdownNow();
            this.executor = null;
        }
    }

    @Override
    public synchronized boolean isRunning() {
        return this.executor != null;
    }

    private void runSafely() {
        try {
            this.task.run();
        } catch (RuntimeException ex) {
            logger.warn("{} failed; the next run is in {}: {}", this.name, this.interval, ex.getMessage(), ex);
        }
    }
}
