package dev.exactlyonce.idempotency.jdbc;

import dev.exactlyonce.idempotency.internal.GuardedBinding;
import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code processed_event} table, one row per event processed (id, name, scope): a claim is one statement in the
 * caller's transaction that does nothing on a duplicate. See docs/design.md, "Guarantees and trade-offs".
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

    /** Takes back a claim of the current transaction, for a batch's event set aside while the rest goes on. */
    public final void unclaim(Key event, GuardedBinding binding) {
        for (String scope : binding.claimScopes()) {
            this.jdbcTemplate.update(this.unclaimSql, event.eventId(), scope, event.eventName());
        }
    }

    /** Claims in the binding's scope and those it takes over; {@code true} when first in all of them. */
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
            Set<Key> first = claimAll(events, scope);
            if (claimed == null) {
                claimed = new HashSet<>(first);
            } else {
                claimed.retainAll(first);
            }
        }
        return claimed;
    }

    /** Records the event in the scope ({@code ""}: the service's); {@code true} on its first delivery there. */
    public abstract boolean claim(Key event, String scope);

    /** Records a batch of events with one statement; returns those of their first delivery, each once. */
    public abstract Set<Key> claimAll(Collection<Key> events, String scope);
}
