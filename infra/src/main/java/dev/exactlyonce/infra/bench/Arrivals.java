package dev.exactlyonce.infra.bench;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/** Counts the events a consumer of the outbox's destination receives and, while latencies are taken, times each. */
final class Arrivals {

    private final AtomicInteger received = new AtomicInteger();

    private final Map<String, Long> commits = new ConcurrentHashMap<>();

    private volatile @Nullable Latencies latencies;

    void reset() {
        this.received.set(0);
        this.commits.clear();
    }

    void timeWith(@Nullable Latencies latencies) {
        this.latencies = latencies;
    }

    /** The event committed then: its arrival is timed from now. */
    void committed(String id, long at) {
        this.commits.put(id, at);
    }

    /** An event arrived, now; its id, if the consumer read it. */
    void arrived(@Nullable String id) {
        long now = System.nanoTime();
        Latencies latencies = this.latencies;
        Long committed = id != null ? this.commits.remove(id) : null;
        if (latencies != null && committed != null) {
            latencies.add(now - committed);
        }
        this.received.incrementAndGet();
    }

    int received() {
        return this.received.get();
    }

    void await(int count, Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (this.received.get() < count) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(
                        "Only %d of %d events arrived within %s".formatted(this.received.get(), count, limit));
            }
            // The consumer counts on its own thread; the benchmark polls the count (2 ms: well below the figures).
            TimeUnit.MILLISECONDS.sleep(2);
        }
    }
}
