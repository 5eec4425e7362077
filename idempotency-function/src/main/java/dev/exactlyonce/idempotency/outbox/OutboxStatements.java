package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.MariaDbDialect;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowCallbackHandler;

/**
 * The outbox's statements on one database ({@link #of}): the write and its key locks, the relay's
 * partition locks, reads and marks, the back-off of refused rows, the figures of the backlog and the purge. The
 * statements that are the same on every database (the parked rows' listing, release and skip) stay with their class.
 */
interface OutboxStatements {

    /** The statements of the dialect's database. */
    static OutboxStatements of(Dialect dialect) {
        return dialect instanceof MariaDbDialect ? MariaDbOutbox.INSTANCE : PostgresOutbox.INSTANCE;
    }

    /** A row to write: the event's id, its destination, its key, its name and its payload (a JSON object). */
    record Row(UUID id, String destination, String key, String name, String payload) {}

    /**
     * Locks the rows' keys (as {@link Outbox#KEY_LOCKS} lock slots, in ascending order, before any row gets its
     * position, until the commit), then inserts the rows in the order they were written. The relay publishes by
     * position, so two transactions that write events of one key have them published in the order they committed.
     */
    void insert(JdbcTemplate jdbc, List<Row> rows);

    /** Marks the rows written in a period unpublished, again; its parameters are the period's start and end. */
    int republish(JdbcTemplate jdbc, Timestamp from, Timestamp to);

    /**
     * Ends the relay's session if it stays idle that long inside the run's transaction (the setting lasts for the
     * transaction), so that a run whose connection went silent does not keep its partitions' locks; nothing where the
     * database has no such setting for one transaction.
     */
    void limitIdleTime(JdbcTemplate jdbc, Duration limit);

    /**
     * The head (oldest unpublished row) of every key that has one, up to {@code maxKeys} keys, in no particular order:
     * what a run chooses its keys from. Its cost is one index probe per key, however many rows a key holds.
     */
    List<Head> heads(JdbcTemplate jdbc, int maxKeys);

    /**
     * A key's head.
     *
     * @param destination its destination
     * @param key the key
     * @param eventName the head row's event name (its route, with the destination)
     * @param position the head row's position
     * @param partition the key's partition ({@code OutboxRelay.PARTITIONS} of them)
     * @param held whether the head was refused and waits for its next attempt, or was parked
     * @param waited how long the head has waited since it became publishable, in seconds
     */
    record Head(
            String destination,
            String key,
            String eventName,
            long position,
            int partition,
            boolean held,
            double waited) {}

    /** Locks those of the partitions no other relay holds (tried, never waited for), until the transaction ends. */
    List<Integer> lockPartitions(JdbcTemplate jdbc, List<Integer> partitions);

    /** The oldest unpublished rows of each of the keys, up to {@code perKey} of each, in the order written. */
    List<OutboxPublisher.Row> pending(JdbcTemplate jdbc, List<Head> keys, int perKey);

    /** Marks the rows published. */
    void markPublished(JdbcTemplate jdbc, List<UUID> ids);

    /**
     * Counts the refused rows' attempts and holds their keys back (1 s, 2 s, 4 s, ... up to the maximum), or parks
     * them after {@code maxAttempts}; calls back with each row's id, key, attempts, whether it is parked, and the
     * seconds until it is tried again.
     */
    void holdBack(
            JdbcTemplate jdbc,
            List<OutboxPublisher.Refusal> refusals,
            int maxAttempts,
            int maxBackOffSeconds,
            RowCallbackHandler refused);

    /**
     * The rows parked, the seconds until a held key's back-off ends ({@code null} when none is held), and how long the
     * oldest row of a held key that is not parked has waited (seconds).
     */
    String held();

    /**
     * The backlog: the unpublished rows, those parked, the oldest publishable one's time and how long it waited
     * (seconds).
     */
    String backlog();

    /** Deletes one batch of the rows published (or, without the relay, written) longer ago than the retention. */
    int purgeBatch(JdbcTemplate jdbc, boolean published, Duration retention, int batchSize);

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
