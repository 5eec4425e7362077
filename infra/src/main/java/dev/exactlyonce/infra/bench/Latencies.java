package dev.exactlyonce.infra.bench;

import java.util.Arrays;

/** Latencies recorded in nanoseconds, summarised as percentiles in milliseconds. */
final class Latencies {

    private long[] values = new long[1 << 14];

    private int size;

    synchronized void add(long nanos) {
        if (this.size == this.values.length) {
            this.values = Arrays.copyOf(this.values, this.size * 2);
        }
        this.values[this.size++] = nanos;
    }

    synchronized int count() {
        return this.size;
    }

    /** The percentile (0 to 100) in milliseconds. */
    synchronized double percentile(double percentile) {
        if (this.size == 0) {
            return Double.NaN;
        }
        long[] sorted = Arrays.copyOf(this.values, this.size);
        Arrays.sort(sorted);
        int index = (int) Math.min(this.size - 1, Math.ceil(percentile / 100 * this.size) - 1);
        return sorted[Math.max(0, index)] / 1_000_000.0;
    }
}
