package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.MariaDbDialect;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowCallbackHandler;

/**
 * The outbox's statements that differ between databases ({@link #of}): the write and its key locks, the relay's
 * partition locks, reads and marks, the back-off of refused rows, the backlog's figures and the purge.
 */
interface OutboxStatements {

    /** The statements of the dialect's database. */
    static OutboxStatements of(Dialect dialect) {
        return dialect instanceof MariaDbDialect ? MariaDbOutbox.INSTANCE : PostgresOutbox.INSTANCE;
    }

    /** The rows of the keys whose first row is not held back, from the rows read with whether each is held. */
    static List<OutboxSender.Row> withoutHeldKeys(List<Pending> rows) {
        Set<String> held = new HashSet<>();
        Set<String> seen = new HashSet<>();
        List<OutboxSender.Row> ready = new ArrayList<>(rows.size());
        for (Pending pending : rows) {
            String key = pending.row().orderKey();
            if (seen.add(key) && pending.held()) {
                held.add(key);
            }
            if (!held.contains(key)) {
                ready.add(pending.row());
            }
        }
        return ready;
    }

    /** A pending row, and whether it is held back (refused and waiting for its next attempt, or parked). */
    record Pending(OutboxSender.Row row, boolean held) {}

    /** A row to write; its payload is a JSON object. */
    record Row(UUID id, String destination, String key, String name, String payload, Instant occurredAt) {}

    /**
     * Locks the rows' keys (their {@code outbox_key} rows, ascending, until the commit) before any row gets its
     * position, then inserts the rows in order: a key's events are published in the order their transactions committed.
     */
    void insert(JdbcTemplate jdbc, List<Row> rows);

    /** Marks the rows written in a period unpublished, again; its parameters are the period's start and end. */
    int republish(JdbcTemplate jdbc, Timestamp from, Timestamp to);

    /**
     * Has the server end the relay's session if it stays idle that long in the transaction just begun, so that a frozen
     * relay does not keep its partitions' locks for hours; returns the session's own limit, where the limit is the
     * session's.
     */
    @Nullable
    String limitIdleTime(Connection connection, Duration limit) throws SQLException;

    /** Sets the session's idle limit back to what {@link #limitIdleTime} returned, if anything, before pooling. */
    default void liftIdleLimit(Connection connection, String previous) throws SQLException {}

    /**
     * The head (oldest unpublished row) of up to {@code maxKeys} keys, one index probe each, from the beginning or past
     * {@code after} (a {@link Heads#next()} of an earlier read).
     */
    Heads heads(JdbcTemplate jdbc, @Nullable Object after, int maxKeys);

    /**
     * Keys' heads.
     *
     * @param heads the heads read
     * @param next where a read of the keys after these starts, when there were more than it read; {@code null} when
     *     it read them all
     */
    record Heads(List<Head> heads, @Nullable Object next) {}

    /**
     * A key's head.
     *
     * @param destination its destination
     * @param key the key
     * @param eventName the head row's event name (its route, with the destination)
     * @param position the head row's position
     * @param partition the key's partition ({@code OutboxRelay.PARTITIONS} of them)
     * @param held whether the head was refused and waits for its next attempt, or was parked
     * @param parked whether the head was parked
     * @param publishableAt when the head became publishable
     * @param waited how long the head has waited since, in seconds
     */
    record Head(
            String destination,
            String key,
            String eventName,
            long position,
            int partition,
            boolean held,
            boolean parked,
            Instant publishableAt,
            double waited) {}

    /** Locks those of the partitions no other relay holds (tried, never waited for), until the transaction ends. */
    List<Integer> lockPartitions(JdbcTemplate jdbc, List<Integer> partitions);

    /**
     * The oldest unpublished rows of each key, up to {@code perKey}, in the order written; none of a key another relay
     * held back or parked meanwhile.
     */
    List<OutboxSender.Row> pending(JdbcTemplate jdbc, List<Head> keys, int perKey);

    /** Marks the rows published. */
    void markPublished(JdbcTemplate jdbc, List<UUID> ids);

    /**
     * Counts the refused rows' attempts and holds their keys back ({@code first} doubling with each attempt up to
     * {@code longest}), or parks them after {@code maxAttempts}; calls back with each row's outcome.
     */
    void holdBack(
            JdbcTemplate jdbc,
            List<OutboxSender.Refusal> refusals,
            int maxAttempts,
            Duration first,
            Duration longest,
            RowCallbackHandler refused);

    /** The rows parked, the seconds until a held key's back-off ends (or {@code null}), and a held key's lag. */
    String held();

    /** How many rows are unpublished, counted up to {@code OutboxBacklog.COUNTED} (an index range, not the table). */
    long unpublished(JdbcTemplate jdbc);

    /** Deletes one batch of the rows published (or, without the relay, written) longer ago than the retention. */
    int purgeBatch(JdbcTemplate jdbc, boolean published, Duration retention, int batchSize);

    /** Deletes one batch of the keys first written longer ago than the retention (a later write adds them again). */
    int purgeKeysBatch(JdbcTemplate jdbc, Duration retention, int batchSize);

    /** Registers who publishes the outbox, unless registered; its parameter is {@code relay} or {@code external}. */
    String registerPublisher();

    /**
     * Refuses to start on a schema that lacks what these statements need besides the tables (MariaDB's lock rows);
     * {@code relayed}: whether this instance relays the outbox.
     *
     * @throws StartupRefusal when it lacks it
     */
    default void checkSchema(JdbcTemplate jdbc, boolean relayed) {}
}
