package dev.exactlyonce.infra.shop;

import java.io.PrintStream;
import java.util.List;

/**
 * What the services made of a scenario: per service, the events it had to process, those it processed, the copies it
 * discarded, its dead letters and its effects; and the verdict.
 *
 * @param written the events the order service wrote to its outbox
 * @param published the messages its relay published, copies included
 * @param hops the events a service emitted, through its outbox, for another
 * @param services one line per service
 */
public record Report(int written, int published, List<Hop> hops, List<ServiceReport> services) {

    /**
     * An event one service emits and another consumes: the second hop of a chain that starts at the order service.
     *
     * @param event the event's name
     * @param from the service that emits it
     * @param to the service that applies it
     * @param emitted the events written to the outbox of {@code from}
     * @param applied the effects of them in {@code to}
     */
    public record Hop(String event, String from, String to, int emitted, int applied) {}

    /**
     * @param service the service
     * @param expected the events it had to process
     * @param processed the events it recorded as processed
     * @param duplicates the copies it discarded (since its last start)
     * @param deadLetters the messages in its dead-letter queue
     * @param seconds how long it took, from the first event it processed to the last
     * @param effects what it did
     * @param differences what differs from exactly once; empty when it is exactly once
     */
    public record ServiceReport(
            String service,
            int expected,
            int processed,
            long duplicates,
            int deadLetters,
            double seconds,
            String effects,
            List<String> differences) {}

    /** Whether every service applied every event exactly once. */
    public boolean exactlyOnce() {
        return this.services.stream().allMatch(service -> service.differences().isEmpty());
    }

    public void print(PrintStream out) {
        out.printf(
                "%nThe order service wrote %d events; its relay published %d messages (copies from the relay and"
                        + " the replay included; the broker's redeliveries come on top).%n%n",
                this.written, this.published);
        out.printf(
                "%-18s %8s %10s %11s %13s %7s  %-44s %s%n",
                "service", "events", "processed", "duplicates", "dead letters", "took", "effects", "verdict");
        for (ServiceReport service : this.services) {
            out.printf(
                    "%-18s %8d %10d %11d %13d %6.1fs  %-44s %s%n",
                    service.service(),
                    service.expected(),
                    service.processed(),
                    service.duplicates(),
                    service.deadLetters(),
                    service.seconds(),
                    service.effects(),
                    service.differences().isEmpty() ? "exactly once" : String.join("; ", service.differences()));
        }
        for (Hop hop : this.hops) {
            out.printf(
                    "%n%s, %s -> %s: %d written to the outbox of %s (one per order), %d applied by %s.%n",
                    hop.event(), hop.from(), hop.to(), hop.emitted(), hop.from(), hop.applied(), hop.to());
        }
        out.printf(
                "%n%s%n",
                exactlyOnce()
                        ? "Verdict: exactly once. Every service applied every event once, whatever the copies,"
                                + " across both hops."
                        : "Verdict: NOT exactly once; see the differences above.");
    }
}
