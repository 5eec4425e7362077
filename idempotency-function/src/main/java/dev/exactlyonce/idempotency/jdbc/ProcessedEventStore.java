package dev.exactlyonce.idempotency.jdbc;

import dev.exactlyonce.idempotency.internal.GuardedBinding;
import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code processed_event} table: one row per event this service has processed.
 *
 * <p>The key is the event id, its name and a scope: {@code ""} when the key scope is the service, the function's name
 * when it is the function. The name is part of the key so that an id taken by an event of another name (a neighbour
 * that saw the id and publishes an event of its own with it) does not make the genuine event a duplicate; a producer
 * never gives two of its events one id, so copies of an event still share their key. Rows written before the name was
 * recorded have the name {@code ""} and count as a claim of their id under any name.
 *
 * <p>A claim is one statement run in the caller's transaction, an insert that does nothing on a duplicate key: a row
 * inserted means first delivery; none means the event is already recorded (a duplicate). A concurrent claim of the
 * same event waits for the first transaction to end: it inserts nothing if that one commits, and inserts if it rolls
 * back. No error is raised on a duplicate, so the transaction stays usable (a unique violation would abort it on
 * PostgreSQL). A batch is claimed the same way, with one statement for all its events, in the order of their keys,
 * so that batches sharing events never deadlock. Each database's statements are its {@link Dialect}'s.
 *
 * <p>A binding that takes a former scope over claims under it too: an event is a first delivery only when none of the
 * scopes held it. Instances of the former version, which claim under the former scope alone, and of the new one then
 * see each other's claims (and wait for each other's, as concurrent copies do). Every instance claims under the
 * scopes in one order, their sorted order, whichever is its own, so that instances of two versions claiming the same
 * event never deadlock (a version rolled back during a roll takes the other's scopes over the other way round).
 */
public abstract sealed class ProcessedEventStore permits PostgresDialect.Claims, MariaDbDialect.Claims {

    /** What a claim records of an event: its id and its name. */
    public record Key(UUID eventId, String eventName) {}

    private static final String UNCLAIM = """
            DELETE FROM %s WHERE event_id = ? AND scope = ? AND event_name = ?""";

    protected final JdbcTemplate jdbcTemplate;

    private final String unclaimSql;

    ProcessedEventStore(JdbcTemplate jdbcTemplate, String tableName) {
        this.jdbcTemplate = jdbcTemplate;
        this.unclaimSql = UNCLAIM.formatted(tableName);
    }

    /**
     * Takes back a claim made in the current transaction, for an event of a batch that turns out not to be processable
     * while the rest of the batch goes on.
     */
    public final void unclaim(Key event, GuardedBinding binding) {
        for (String scope : binding.claimScopes()) {
            this.jdbcTemplate.update(this.unclaimSql, event.eventId(), scope, event.eventName());
        }
    }

    /**
     * Records the event for the binding, in its scope and in those it takes over; {@code true} when this is its first
     * delivery in all of them.
     */
    public final boolean claim(Key event, GuardedBinding binding) {
        if (binding.takenOverScopes().isEmpty()) {
            return claim(event, binding.scope());
        }
        boolean first = true;
        for (String scope : binding.claimScopes()) {
            // Under each of them, even after a duplicate: an instance of either version then finds the claim.
            first &= claim(event, scope);
        }
        return first;
    }

    /** Records a batch of events for the binding, as {@link #claim(Key, GuardedBinding)} does; returns the first. */
    public final Set<Key> claimAll(Collection<Key> events, GuardedBinding binding) {
        if (binding.takenOverScopes().isEmpty()) {
            return claimAll(events, binding.scope());
        }
        Set<Key> claimed = null;
        for (String scope : binding.claimScopes()) {
            // Every event under each scope, as a single message's claim does.
            Set<Key> first = claimAll(events, scope);
            if (claimed == null) {
                claimed = new HashSet<>(first);
            } else {
                claimed.retainAll(first);
            }
        }
        return claimed;
    }

    /**
     * Records the event in the scope ({@code ""} for the whole service, or a function's name); {@code true} when this
     * is its first delivery in that scope.
     */
    public abstract boolean claim(Key event, String scope);

    /**
     * Records a batch of events with one statement; returns those of their first delivery. An event repeated within
     * the batch is claimed (and returned) once.
     */
    public abstract Set<Key> claimAll(Collection<Key> events, String scope);
}
