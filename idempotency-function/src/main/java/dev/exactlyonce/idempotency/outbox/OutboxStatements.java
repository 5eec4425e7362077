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

/** The outbox's statements that differ between databases, one implementation per database ({@link #of}). */
interface OutboxStatements {

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
     * Has the server end the session if it stays idle that long in the transaction just begun (a frozen relay would
     * keep its partitions' locks for hours); returns the session's previous limit where the limit is the session's.
     */
    @Nullable
    String limitIdleTime(Connection connection, Duration limit) throws SQLException;

    /** Sets the session's idle limit back to what {@link #limitIdleTime} returned, if anything, before pooling. */
    default void liftIdleLimit(Connection connection, String previous) throws SQLException {}

    /** Up to {@code maxKeys} keys' heads, one index probe each, past {@code after} (a {@link Heads#next()}). */
    Heads heads(JdbcTemplate jdbc, @Nullable Object after, int maxKeys);

    /** Keys' heads, and where a read of the keys after them starts ({@code null} when it read them all). */
    record Heads(List<Head> heads, @Nullable Object next) {}

    /**
     * The keys of the unpublished rows committed since the read that returned {@code since}, each with the lowest
     * position among them, whatever order the rows' positions committed in; {@code since} {@code null} reads none,
     * and starts. {@code null} when the database cannot tell: the relay then reads every key's head in each run.
     */
    default @Nullable NewRows newRows(JdbcTemplate jdbc, @Nullable Object since) {
        return null;
    }

    /** The keys with rows committed since a read, and what the next read passes as {@code since}. */
    record NewRows(List<KeyPosition> keys, Object since) {}

    /** A key, and a position (of a row, or below which its rows are published). */
    record KeyPosition(String destination, String key, long position) {

        String orderKey() {
            return OutboxSender.Row.orderKey(this.destination, this.key);
        }
    }

    /** The heads of these keys, each past its position, one index probe each; called only where {@link #newRows} is. */
    default List<Head> headsPast(JdbcTemplate jdbc, List<KeyPosition> keys) {
        throw new UnsupportedOperationException("This database cannot tell the rows written since a read");
    }

    /**
     * A key's head (oldest unpublished row): {@code held} when refused and waiting for its next attempt, or parked;
     * {@code waited}, the seconds since it became publishable.
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
     * Up to {@code perKey} oldest unpublished rows per key from its head, in order; none of a key another relay held
     * back since.
     */
    List<OutboxSender.Row> pending(JdbcTemplate jdbc, List<Head> keys, int perKey);

    void markPublished(JdbcTemplate jdbc, List<UUID> ids);

    /** Counts the refused rows' attempts and holds their keys back, or parks them; calls back with each outcome. */
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
     * Refuses to start on a schema that lacks what these statements need besides the tables (MariaDB's lock rows).
     *
     * @throws StartupRefusal when it lacks it
     */
    default void checkSchema(JdbcTemplate jdbc, boolean relayed) {}
}
