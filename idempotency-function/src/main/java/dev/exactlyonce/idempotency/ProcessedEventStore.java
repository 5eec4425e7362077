package dev.exactlyonce.idempotency;

import java.sql.PreparedStatement;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
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
 * <p>A claim is one statement, {@code INSERT ... ON CONFLICT DO NOTHING}, run in the caller's transaction: one row
 * inserted means first delivery; zero rows means the event is already recorded (a duplicate). A concurrent claim of
 * the same event waits for the first transaction to end: it inserts nothing if that one commits, and inserts if it
 * rolls back. No error is raised on a duplicate, so the transaction stays usable (a unique violation would abort it).
 * A batch is claimed the same way, with one statement for all its events ({@code INSERT ... SELECT unnest(?, ?) ...
 * RETURNING}), in the order of their keys, so that batches sharing events never deadlock.
 */
final class ProcessedEventStore {

    /** What a claim records of an event: its id and its name. */
    record Key(UUID eventId, String eventName) {}

    // A row of an earlier version ('' for the name) is a claim of its id under any name. Only instances of an earlier
    // version write such rows (and the copy of a former scope's claims copies them): once those have stopped, none is
    // being written, so looking for one needs no lock (operations.md says to stop them before upgrading).
    private static final String CLAIM = """
            INSERT INTO %1$s (event_id, scope, event_name) SELECT ?, ?, ?
            WHERE NOT EXISTS (SELECT FROM %1$s WHERE event_id = ? AND scope = ? AND event_name = '')
            ON CONFLICT DO NOTHING""";

    // In the keys' order, whatever the order of the messages: two batches that share events then wait for each other
    // in the same order, never in a cycle (a deadlock, 40P01, would fail one of them).
    private static final String CLAIM_ALL = """
            INSERT INTO %1$s (event_id, scope, event_name)
            SELECT event.id, ?, event.name FROM unnest(?::uuid[], ?::text[]) AS event(id, name)
            WHERE NOT EXISTS (SELECT FROM %1$s AS earlier
                              WHERE earlier.event_id = event.id AND earlier.scope = ? AND earlier.event_name = '')
            ORDER BY event.id, event.name
            ON CONFLICT DO NOTHING RETURNING event_id, event_name""";

    private static final String UNCLAIM = """
            DELETE FROM %s WHERE event_id = ? AND scope = ? AND event_name = ?""";

    private final JdbcTemplate jdbcTemplate;

    private final String unclaimSql;

    private final String claimSql;

    private final String claimAllSql;

    ProcessedEventStore(JdbcTemplate jdbcTemplate, String tableName) {
        this.jdbcTemplate = jdbcTemplate;
        this.claimSql = CLAIM.formatted(tableName);
        this.claimAllSql = CLAIM_ALL.formatted(tableName);
        this.unclaimSql = UNCLAIM.formatted(tableName);
    }

    /**
     * Takes back a claim made in the current transaction, for an event of a batch that turns out not to be processable
     * while the rest of the batch goes on.
     */
    void unclaim(Key event, String scope) {
        this.jdbcTemplate.update(this.unclaimSql, event.eventId(), scope, event.eventName());
    }

    /**
     * Records the event in the scope ({@code ""} for the whole service, or a function's name); {@code true} when this
     * is its first delivery in that scope.
     */
    boolean claim(Key event, String scope) {
        return this.jdbcTemplate.update(
                        this.claimSql, event.eventId(), scope, event.eventName(), event.eventId(), scope)
                == 1;
    }

    /**
     * Records a batch of events with one statement; returns those of their first delivery. An event repeated within
     * the batch is claimed (and returned) once.
     */
    Set<Key> claimAll(Collection<Key> events, String scope) {
        List<Key> claimed = this.jdbcTemplate.query(
                connection -> {
                    PreparedStatement statement = connection.prepareStatement(this.claimAllSql);
                    statement.setString(1, scope);
                    statement.setArray(
                            2,
                            connection.createArrayOf(
                                    "uuid", events.stream().map(Key::eventId).toArray()));
                    statement.setArray(
                            3,
                            connection.createArrayOf(
                                    "text", events.stream().map(Key::eventName).toArray()));
                    statement.setString(4, scope);
                    return statement;
                },
                (row, index) -> new Key(row.getObject(1, UUID.class), row.getString(2)));
        return new HashSet<>(claimed);
    }
}
