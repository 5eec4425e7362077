package dev.exactlyonce.infra.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The CPU time the machine and this JVM had spent at one moment, so that a run's CPU per event can be worked out: what
 * a scenario costs in work, whatever it waited for (the disk's flushes, the other tenants of shared cores).
 *
 * <p>The machine's is read from Linux's {@code /proc/stat}: user, nice, system, irq and softirq time of all cores, in
 * clock ticks (10 ms); idle, I/O wait and the time taken by the hypervisor for other machines (steal) are left out.
 * Everything on the machine counts: the broker and the database, which the benchmark runs against on the same cores,
 * as much as this JVM. Elsewhere than on Linux, the machine's time is unknown ({@code -1}).
 *
 * @param machineTicks the machine's busy clock ticks, {@code -1} where unknown
 * @param jvmNanos this JVM's CPU time, in nanoseconds ({@code -1} where unknown)
 */
record CpuTime(long machineTicks, long jvmNanos) {

    private static final Path PROC_STAT = Path.of("/proc/stat");

    /** Linux's {@code USER_HZ}: the clock ticks per second of {@code /proc/stat}, 100 on every architecture. */
    private static final double TICKS_PER_SECOND = 100;

    static CpuTime now() {
        return new CpuTime(readMachineTicks(), readJvmNanos());
    }

    /**
     * The CPU time from this moment to a later one, per event, in microseconds: the machine's and this JVM's, each
     * {@code NaN} where unknown.
     */
    PerEvent perEvent(CpuTime later, int events) {
        if (events <= 0) {
            return PerEvent.UNKNOWN;
        }
        return new PerEvent(
                this.machineTicks < 0 || later.machineTicks < 0
                        ? Double.NaN
                        : (later.machineTicks - this.machineTicks) / TICKS_PER_SECOND * 1e6 / events,
                this.jvmNanos < 0 || later.jvmNanos < 0 ? Double.NaN : (later.jvmNanos - this.jvmNanos) / 1e3 / events);
    }

    /**
     * CPU time per event, in microseconds.
     *
     * @param machineMicros the machine's: every process on it
     * @param jvmMicros this JVM's
     */
    record PerEvent(double machineMicros, double jvmMicros) {

        static final PerEvent UNKNOWN = new PerEvent(Double.NaN, Double.NaN);
    }

    private static long readMachineTicks() {
        try (var lines = Files.lines(PROC_STAT)) {
            String all = lines.findFirst().orElse("");
            if (!all.startsWith("cpu ")) {
                return -1;
            }
            String[] fields = all.trim().split("\\s+");
            // cpu user nice system idle iowait irq softirq steal ...
            long busy = 0;
            for (int field : new int[] {1, 2, 3, 6, 7}) {
                busy += Long.parseLong(fields[field]);
            }
            return busy;
        } catch (IOException | RuntimeException ex) {
            return -1;
        }
    }

    private static long readJvmNanos() {
        return ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os
                ? os.getProcessCpuTime()
                : -1;
    }
}
