package dev.exactlyonce.infra;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.outbox.ParkedOutboxEvents;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;

/**
 * {@code outbox-parked [release|skip <event id>... | --all]}: lists the outbox events a service's relay parked, or
 * releases or skips them, in the service's database (read from the service's own {@code SPRING_DATASOURCE_*}
 * variables).
 */
final class OutboxParkedCommand {

    /** The most parked events listed, and how many {@code --all} reads at a time (it acts on all of them). */
    private static final int LIMIT = 1_000;

    private final Map<String, String> env;

    private final PrintStream out;

    OutboxParkedCommand(Map<String, String> env, PrintStream out) {
        this.env = env;
        this.out = out;
    }

    int run(List<String> args) {
        String action = args.isEmpty() ? "list" : args.get(0);
        if (!List.of("list", "release", "skip").contains(action)) {
            throw new IllegalArgumentException(
                    "outbox-parked takes list, release or skip, not '%s'.".formatted(action));
        }
        if (!action.equals("list") && args.size() < 2) {
            throw new IllegalArgumentException("outbox-parked %s needs the event ids (or --all).".formatted(action));
        }
        List<UUID> ids = action.equals("list") ? List.of() : eventIds(args.subList(1, args.size()));
        String url = this.env.get("SPRING_DATASOURCE_URL");
        if (url == null || url.isBlank()) {
            throw new IllegalArgumentException(("outbox-parked reads the service's database from"
                    + " SPRING_DATASOURCE_URL (and SPRING_DATASOURCE_USERNAME, SPRING_DATASOURCE_PASSWORD), as the"
                    + " service does; it is not set."));
        }
        // One connection for the whole command: a connection per statement cost 30 ms a row (--all over 1,500
        // parked rows took 49 s).
        SingleConnectionDataSource dataSource = new SingleConnectionDataSource(
                url,
                this.env.getOrDefault("SPRING_DATASOURCE_USERNAME", ""),
                this.env.getOrDefault("SPRING_DATASOURCE_PASSWORD", ""),
                true);
        try {
            ParkedOutboxEvents parked = new ParkedOutboxEvents(dataSource);
            if (action.equals("list")) {
                print(parked.list(LIMIT));
                return 0;
            }
            return ids.isEmpty() ? actOnAll(parked, action) : actOn(parked, action, ids);
        } finally {
            dataSource.destroy();
        }
    }

    private int actOn(ParkedOutboxEvents parked, String action, List<UUID> ids) {
        int missing = 0;
        for (UUID id : ids) {
            if (apply(parked, action, id)) {
                this.out.printf("%s %s%n", past(action), id);
            } else {
                this.out.printf("%s is not parked (published, skipped, released, or not in this outbox)%n", id);
                missing++;
            }
        }
        if (action.equals("release") && missing < ids.size()) {
            this.out.println("The service's relay tries the released events again within its poll interval.");
        }
        return missing == 0 ? 0 : 1;
    }

    /**
     * Acts on every parked event, {@value #LIMIT} at a time, until none is left that it has not tried; says how many it
     * handled and how many are still parked (parked meanwhile, or released by another operator and parked again).
     */
    private int actOnAll(ParkedOutboxEvents parked, String action) {
        Set<UUID> tried = new HashSet<>();
        int applied = 0;
        List<UUID> page = untried(parked.list(LIMIT), tried);
        while (!page.isEmpty()) {
            for (UUID id : page) {
                tried.add(id);
                if (apply(parked, action, id)) {
                    applied++;
                }
            }
            this.out.printf("%s %d parked event(s) so far%n", past(action), applied);
            page = untried(parked.list(LIMIT), tried);
        }
        int left = parked.list(LIMIT).size();
        this.out.printf(
                "%s %d parked event(s); %s%n",
                past(action),
                applied,
                left == 0 ? "none is parked now" : left + (left == LIMIT ? " or more" : "") + " still parked");
        if (action.equals("release") && applied > 0) {
            this.out.println("The service's relay tries the released events again within its poll interval.");
        }
        return left == 0 ? 0 : 1;
    }

    private static List<UUID> untried(List<ParkedOutboxEvents.Parked> parked, Set<UUID> tried) {
        return parked.stream()
                .map(ParkedOutboxEvents.Parked::id)
                .filter(id -> !tried.contains(id))
                .toList();
    }

    private static boolean apply(ParkedOutboxEvents parked, String action, UUID id) {
        return action.equals("release") ? parked.release(id) : parked.skip(id);
    }

    private static String past(String action) {
        return action.equals("release") ? "released" : "skipped";
    }

    private void print(List<ParkedOutboxEvents.Parked> listed) {
        if (listed.isEmpty()) {
            this.out.println("No parked outbox events.");
            return;
        }
        this.out.printf("%d parked outbox event(s), oldest first:%n", listed.size());
        for (ParkedOutboxEvents.Parked event : listed) {
            this.out.printf(
                    "%s  %s  %s key %s: refused %d time(s), parked %s, %d later event(s) of its key waiting%n    %s%n",
                    event.id(),
                    printable(event.destination()),
                    printable(event.eventName()),
                    printable(event.key()),
                    event.attempts(),
                    event.parkedAt(),
                    event.heldBack(),
                    printable(event.lastError() != null ? event.lastError() : ""));
        }
        this.out.println("Release (tried again) or skip (never published): outbox-parked release|skip <event id>...");
    }

    /** What a terminal shows as it is: control characters escaped, long texts cut. */
    static String printable(String text) {
        StringBuilder printable = new StringBuilder();
        text.codePoints().limit(300).forEach(c -> {
            if (Character.isISOControl(c)) {
                printable.append("\\u%04x".formatted(c));
            } else {
                printable.appendCodePoint(c);
            }
        });
        return text.codePointCount(0, text.length()) > 300 ? printable + "..." : printable.toString();
    }

    private static List<UUID> eventIds(List<String> args) {
        if (args.equals(List.of("--all"))) {
            return List.of();
        }
        List<UUID> ids = new ArrayList<>();
        for (String arg : args) {
            for (String text : arg.split(",")) {
                UUID id = EnvelopeCodec.parseCanonicalUuid(text.trim());
                if (id == null) {
                    throw new IllegalArgumentException("'%s' is not an event id (a UUID).".formatted(text.trim()));
                }
                ids.add(id);
            }
        }
        return ids;
    }
}
