package dev.exactlyonce.idempotency.outbox;

import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * What the relay waits out in this process: an unanswered destination, a refused route, a key whose send failed
 * without saying why. None counts an attempt; each backs off from {@code first-hold} up to {@code longest-hold}, and
 * ends once a row of it is confirmed. See docs/outbox.md ("What a failure says of a row").
 */
final class Holds {

    private static final Logger logger = LoggerFactory.getLogger(Holds.class);

    /** How lately a destination must have confirmed a row for a failure that tells nothing to be the row's. */
    static final Duration EVIDENCE = Duration.ofMinutes(1);

    enum Kind {
        DESTINATION("destination"),
        ROUTE("route"),
        KEY("key");

        private final String label;

        Kind(String label) {
            this.label = label;
        }

        @Override
        public String toString() {
            return this.label;
        }
    }

    /**
     * A hold of a destination, a route ({@code destination event-name}) or a key ({@code destination key}): its last
     * failure, when the first was, how many in a row, when it is tried again, and the waits after that.
     */
    record Held(
            Kind kind,
            String name,
            String reason,
            Instant since,
            int failures,
            Instant until,
            BackOffExecution waits) {}

    private final Map<String, Held> held = new ConcurrentHashMap<>();

    /** When each destination last confirmed a row. */
    private final Map<String, Instant> confirmed = new ConcurrentHashMap<>();

    private final Duration first;

    private final Duration longest;

    private final ExponentialBackOff waits;

    Holds(Duration first, Duration longest) {
        this.first = first;
        this.longest = longest;
        this.waits = OutboxRelay.waits(first, longest);
    }

    boolean holds(OutboxSender.Row row) {
        return holds(row.destination(), row.eventName(), row.orderKey());
    }

    /** Whether a row of that destination, event name and key ({@link OutboxSender.Row#orderKey()}) waits. */
    boolean holds(String destination, String eventName, String orderKey) {
        Instant now = Instant.now();
        return due(Kind.DESTINATION, destination, now)
                || due(Kind.ROUTE, route(destination, eventName), now)
                || due(Kind.KEY, orderKey, now);
    }

    /**
     * Whether the destination's hold ended and no row of it was confirmed since: a run tries one key of it, so that a
     * broker still away holds one key's partition for the confirm timeout, not all.
     */
    boolean probing(String destination) {
        return this.held.containsKey(Kind.DESTINATION + "\n" + destination);
    }

    private boolean due(Kind kind, String name, Instant now) {
        Held hold = this.held.get(kind + "\n" + name);
        return hold != null && hold.until().isAfter(now);
    }

    /** Holds the row's destination, route or key (by {@code kind}) one step longer than before. */
    void hold(Kind kind, OutboxSender.Row row, String reason) {
        String name = switch (kind) {
            case DESTINATION -> row.destination();
            case ROUTE -> route(row);
            case KEY -> row.destination() + " " + row.key();
        };
        Instant now = Instant.now();
        Held hold = this.held.compute(kind + "\n" + (kind == Kind.KEY ? row.orderKey() : name), (id, before) -> {
            if (before == null) {
                BackOffExecution waits = this.waits.start();
                return new Held(kind, name, reason, now, 1, now.plusMillis(waits.nextBackOff()), waits);
            }
            return new Held(
                    kind,
                    name,
                    reason,
                    before.since(),
                    before.failures() + 1,
                    now.plusMillis(before.waits().nextBackOff()),
                    before.waits());
        });
        if (hold.failures() == 1 && kind != Kind.KEY) {
            logger.warn(
                    "The outbox relay holds the {} {}: no row of it counts an attempt or is parked, each of its keys"
                            + " keeps its order, and it is tried again in {}, then less and less often, up to every"
                            + " {}, until the broker takes a row of it: {}",
                    kind,
                    name,
                    this.first,
                    this.longest,
                    reason);
        } else {
            logger.debug(
                    "The outbox relay holds the {} {} ({} failure(s) in a row): {}",
                    kind,
                    name,
                    hold.failures(),
                    reason);
        }
    }

    /** Lets the row's destination, route and key go: the broker confirmed the row. */
    void confirmed(OutboxSender.Row row) {
        Instant now = Instant.now();
        this.confirmed.put(row.destination(), now);
        release(Kind.DESTINATION, row.destination(), now);
        release(Kind.ROUTE, route(row), now);
        release(Kind.KEY, row.orderKey(), now);
    }

    private void release(Kind kind, String name, Instant now) {
        Held hold = this.held.remove(kind + "\n" + name);
        if (hold != null && kind != Kind.KEY) {
            logger.info(
                    "The outbox relay publishes to the {} {} again, after {} of failures",
                    kind,
                    hold.name(),
                    Duration.between(hold.since(), now).withNanos(0));
        }
    }

    /** Whether the destination confirmed a row lately ({@link #EVIDENCE}): a failure telling nothing is the row's. */
    boolean confirmedLately(String destination) {
        Instant last = this.confirmed.get(destination);
        return last != null && last.plus(EVIDENCE).isAfter(Instant.now());
    }

    /** How soon the next hold ends, if one is under way. */
    @Nullable
    Duration nextEnd() {
        Instant now = Instant.now();
        return this.held.values().stream()
                .map(Held::until)
                .filter(until -> until.isAfter(now))
                .min(Comparator.naturalOrder())
                .map(until -> Duration.between(now, until))
                .orElse(null);
    }

    /** The destinations and routes held, longest first (keys are counted, not listed). */
    List<Held> list() {
        return this.held.values().stream()
                .filter(hold -> hold.kind() != Kind.KEY)
                .sorted(Comparator.comparing(Held::since))
                .toList();
    }

    /** How many keys are held for failures that told nothing. */
    long keys() {
        return this.held.values().stream()
                .filter(hold -> hold.kind() == Kind.KEY)
                .count();
    }

    private static String route(OutboxSender.Row row) {
        return route(row.destination(), row.eventName());
    }

    private static String route(String destination, String eventName) {
        return destination + " " + eventName;
    }
}
