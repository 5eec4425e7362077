package dev.exactlyonce.idempotency;

import java.sql.PreparedStatement;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code processed_event} table: one row per event id this service has processed.
 *
 * <p>The key is the event id and a scope: {@code ""} when the key scope is the service, the function's name when it is
 * the function. A claim is one statement, {@code INSERT ... ON CONFLICT DO NOTHING}, run in the caller's transaction: one row
 * inserted means first delivery; zero rows means the id is already recorded (a duplicate). A concurrent claim of the
 * same id waits for the first transaction to end: it inserts nothing if that one commits, and inserts if it rolls
 * back. No error is raised on a duplicate, so the transaction stays usable (a unique violation would abort it). A batch
 * is claimed the same way, with one statement for all its ids ({@code INSERT ... SELECT unnest(?) ... RETURNING}), in
 * the order of the ids, so that batches sharing ids never deadlock.
 */
final class ProcessedEventStore {

    private static final String CLAIM = """
            INSERT INTO %s (event_id, scope) VALUES (?, ?) ON CONFLICT DO NOTHING""";

    // In the ids' order, whatever the order of the messages: two batches that share ids then wait for each other in
    // the same order, never in a cycle (a deadlock, 40P01, would fail one of them).
    private static final String CLAIM_ALL = """
            INSERT INTO %s (event_id, scope) SELECT id, ? FROM unnest(?::uuid[]) AS id ORDER BY id
            ON CONFLICT DO NOTHING RETURNING event_id""";

    private static final String UNCLAIM = """
            DELETE FROM %s WHERE event_id = ? AND scope = ?""";

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
    void unclaim(UUID eventId, String scope) {
        this.jdbcTemplate.update(this.unclaimSql, eventId, scope);
    }

    /**
     * Records the event id in the scope ({@code ""} for the whole service, or a function's name); {@code true} when
     * this is its first delivery in that scope.
     */
    boolean claim(UUID eventId, String scope) {
        return this.jdbcTemplate.update(this.claimSql, eventId, scope) == 1;
    }

    /**
     * Records a batch of event ids with one statement; returns those of their first delivery. An id repeated within the
     * batch is claimed (and returned) once.
     */
    Set<UUID> claimAll(Collection<UUID> eventIds, String scope) {
        List<UUID> claimed = this.jdbcTemplate.query(
                connection -> {
                    PreparedStatement statement = connection.prepareStatement(this.claimAllSql);
                    statement.setString(1, scope);
                    statement.setArray(2, connection.createArrayOf("uuid", eventIds.toArray()));
                    return statement;
                },
                (row, index) -> row.getObject(1, UUID.class));
        return new HashSet<>(claimed);
    }
}
