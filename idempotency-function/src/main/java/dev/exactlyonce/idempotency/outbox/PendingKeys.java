package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.outbox.OutboxStatements.Head;
import dev.exactlyonce.idempotency.outbox.OutboxStatements.KeyPosition;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The keys a relay knows to have unpublished rows, each with a position below which its rows are published, so that a
 * run reads each key's head past the rows it published: a transaction held open keeps them in the index. Every key's
 * head is read at start (a read that a transaction held open makes long), then only the keys of the rows committed
 * since the last read. See docs/outbox.md ("A transaction held open").
 */
final class PendingKeys {

    /** The most keys tracked: past it, the relay reads every key's head in full again, as at start. */
    static final int MAX_TRACKED = 100_000;

    private final int maxTracked;

    /** The keys with unpublished rows, by {@link KeyPosition#orderKey()}, in order: each run goes on past the last. */
    private final TreeMap<String, KeyPosition> pending = new TreeMap<>();

    /** Keys found published up to a position, the least lately seen forgotten first. */
    private final Map<String, KeyPosition> published = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, KeyPosition> eldest) {
            return size() > PendingKeys.this.maxTracked;
        }
    };

    /** What the last read of the rows committed since passed on; {@code null} before the first. */
    private @Nullable Object since;

    /** Where the read of every key's head goes on, when it has more than one run's keys. */
    private @Nullable Object scanFrom;

    /** Whether every key's head was read since the first read of the rows committed since, with all keys tracked. */
    private boolean scanned;

    /** Whether a key was left untracked during this read of every key's head: it is read once more. */
    private boolean overflowed;

    /** The last key whose head a run read: the next run goes on past it. */
    private @Nullable String probedTo;

    PendingKeys() {
        this(MAX_TRACKED);
    }

    PendingKeys(int maxTracked) {
        this.maxTracked = maxTracked;
    }

    /** The heads of up to {@code maxKeys} keys, and whether keys were left for the next run. */
    record Read(List<Head> heads, boolean more) {}

    synchronized Read read(OutboxStatements sql, JdbcTemplate jdbc, int maxKeys) {
        OutboxStatements.NewRows written = sql.newRows(jdbc, this.since);
        if (written == null) {
            // The database cannot tell what was committed since: every run reads every key's head, in turns.
            return readAll(sql, jdbc, maxKeys);
        }
        this.since = written.since();
        written.keys().forEach(this::written);
        List<Head> heads = new ArrayList<>();
        Set<String> read = new HashSet<>();
        if (!this.scanned) {
            if (this.scanFrom == null) {
                // The keys left untracked so far are all read in this read of every key's head.
                this.overflowed = false;
            }
            OutboxStatements.Heads all = sql.heads(jdbc, this.scanFrom, maxKeys);
            for (Head head : all.heads()) {
                heads.add(head);
                read.add(OutboxSender.Row.orderKey(head.destination(), head.key()));
                track(new KeyPosition(head.destination(), head.key(), head.position() - 1));
            }
            this.scanFrom = all.next();
            if (all.next() == null) {
                this.scanned = !this.overflowed;
                this.overflowed = false;
            }
        }
        List<KeyPosition> keys = next(maxKeys - heads.size(), read);
        if (!keys.isEmpty()) {
            Set<String> found = new HashSet<>();
            for (Head head : sql.headsPast(jdbc, keys)) {
                heads.add(head);
                found.add(OutboxSender.Row.orderKey(head.destination(), head.key()));
                track(new KeyPosition(head.destination(), head.key(), head.position() - 1));
            }
            keys.stream()
                    .filter(key -> !found.contains(key.orderKey()))
                    .forEach(key -> this.published.put(key.orderKey(), this.pending.remove(key.orderKey())));
        }
        return new Read(heads, !this.scanned || this.probedTo != null);
    }

    /** A key of rows committed since: its position goes down to theirs, if they are below it. */
    private void written(KeyPosition key) {
        String orderKey = key.orderKey();
        KeyPosition known =
                this.pending.containsKey(orderKey) ? this.pending.get(orderKey) : this.published.get(orderKey);
        long past = key.position() - 1;
        track(new KeyPosition(key.destination(), key.key(), known != null ? Math.min(known.position(), past) : past));
    }

    private void track(KeyPosition key) {
        String orderKey = key.orderKey();
        this.published.remove(orderKey);
        if (this.pending.size() < this.maxTracked || this.pending.containsKey(orderKey)) {
            this.pending.put(orderKey, key);
        } else {
            // Every key's head is read again (once more if this read is past the key): the key is found there.
            this.scanned = false;
            this.overflowed = true;
        }
    }

    /** Up to {@code maxKeys} keys past the last read, then from the first, but those just read. */
    private List<KeyPosition> next(int maxKeys, Set<String> read) {
        List<KeyPosition> keys = new ArrayList<>();
        if (maxKeys <= 0) {
            return keys;
        }
        String from = this.probedTo;
        this.probedTo = null;
        Stream<KeyPosition> order = from == null
                ? this.pending.values().stream()
                : Stream.concat(
                        this.pending.tailMap(from, false).values().stream(),
                        this.pending.headMap(from, true).values().stream());
        for (KeyPosition key : (Iterable<KeyPosition>) order::iterator) {
            if (keys.size() == maxKeys) {
                this.probedTo = keys.get(keys.size() - 1).orderKey();
                break;
            }
            if (!read.contains(key.orderKey())) {
                keys.add(key);
            }
        }
        return keys;
    }

    /** Every key's head, past the last key the previous run read, wrapping once: every key's turn comes. */
    private Read readAll(OutboxStatements sql, JdbcTemplate jdbc, int maxKeys) {
        Object from = this.scanFrom;
        OutboxStatements.Heads heads = sql.heads(jdbc, from, maxKeys);
        this.scanFrom = heads.next();
        if (heads.next() != null || from == null) {
            return new Read(heads.heads(), this.scanFrom != null);
        }
        OutboxStatements.Heads first =
                sql.heads(jdbc, null, maxKeys - heads.heads().size());
        this.scanFrom = first.next();
        Set<String> read = new HashSet<>();
        List<Head> all = new ArrayList<>(heads.heads());
        all.forEach(head -> read.add(OutboxSender.Row.orderKey(head.destination(), head.key())));
        first.heads().stream()
                .filter(head -> read.add(OutboxSender.Row.orderKey(head.destination(), head.key())))
                .forEach(all::add);
        return new Read(all, this.scanFrom != null);
    }
}
