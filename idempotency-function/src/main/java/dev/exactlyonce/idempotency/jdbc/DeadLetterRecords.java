package dev.exactlyonce.idempotency.jdbc;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The events the guard dead-lettered ({@code <table>_dead_letter}), by binding, id, name and body's SHA-256: a dead
 * letter moved back is taken only when recorded here. Not API. See docs/operations.md, "Replaying dead letters".
 */
public final class DeadLetterRecords {

    private final JdbcTemplate jdbc;

    private final String record;

    private final String recorded;

    private final String takenBack;

    private final String waiting;

    private final String oldestWaiting;

    private final String purge;

    private final Duration retention;

    /**
     * {@code table} is the table of claims, {@link #tableOf} its records'; each statement has {@code %s} for the
     * latter.
     */
    DeadLetterRecords(
            JdbcTemplate jdbc,
            String table,
            Duration retention,
            String record,
            String recorded,
            String takenBack,
            String waiting,
            String oldestWaiting,
            String purge) {
        String records = tableOf(table);
        this.jdbc = jdbc;
        this.retention = retention;
        this.record = record.formatted(records);
        this.recorded = recorded.formatted(records);
        this.takenBack = takenBack.formatted(records);
        this.waiting = waiting.formatted(records);
        this.oldestWaiting = oldestWaiting.formatted(records);
        this.purge = purge.formatted(records);
    }

    /** Dead letters waiting to be replayed (or discarded: the records cannot tell); {@code oldest} null when none. */
    public record Waiting(long count, @Nullable Instant oldest) {}

    /** A dead letter still waiting to be replayed: its event's id, and when the guard dead-lettered it. */
    public record WaitingDeadLetter(UUID eventId, Instant deadLetteredAt) {}

    /** The table of a table of claims' dead letters. */
    public static String tableOf(String tableName) {
        return tableName + "_dead_letter";
    }

    /**
     * Records that the binding dead-lettered the event with that body, once, outside a transaction, waiting at most
     * {@code networkTimeout} (0: no limit): a silent network is then an outage, not a blocked thread.
     */
    public void record(String binding, UUID eventId, String eventName, byte[] body, Duration networkTimeout) {
        this.jdbc.execute((ConnectionCallback<Integer>) connection -> {
            int before = connection.getNetworkTimeout();
            if (!networkTimeout.isZero()) {
                connection.setNetworkTimeout(Runnable::run, (int) networkTimeout.toMillis());
            }
            try (PreparedStatement statement = connection.prepareStatement(this.record)) {
                statement.setString(1, binding);
                statement.setString(2, eventId.toString());
                statement.setString(3, eventName);
                statement.setBytes(4, sha256(body));
                return statement.executeUpdate();
            } finally {
                restore(connection, networkTimeout, before);
            }
        });
    }

    /** Whether the binding dead-lettered the event with that body, within the dead-letters' retention. */
    public boolean recorded(String binding, UUID eventId, String eventName, byte[] body) {
        return Boolean.TRUE.equals(this.jdbc.queryForObject(
                this.recorded, Boolean.class, binding, eventId.toString(), eventName, sha256(body), micros()));
    }

    /** Marks a dead letter taken back, in the transaction that claimed its replay; the first mark stays. */
    public void takenBack(String binding, UUID eventId, String eventName, byte[] body) {
        this.jdbc.update(this.takenBack, binding, eventId.toString(), eventName, sha256(body));
    }

    public Waiting waiting() {
        return Objects.requireNonNull(this.jdbc.queryForObject(
                this.waiting,
                (row, n) -> {
                    Timestamp oldest = row.getTimestamp(2);
                    return new Waiting(row.getLong(1), oldest != null ? oldest.toInstant() : null);
                },
                micros()));
    }

    /** The dead letters that have waited longest, oldest first: at most {@code limit}. */
    public List<WaitingDeadLetter> oldestWaiting(int limit) {
        return this.jdbc.query(
                this.oldestWaiting,
                (row, n) -> new WaitingDeadLetter(
                        UUID.fromString(row.getString(1)), row.getTimestamp(2).toInstant()),
                micros(),
                limit);
    }

    /** How long a dead letter can wait and still be taken back. */
    public Duration retention() {
        return this.retention;
    }

    /** Deletes the records older than the dead-letters' retention; the rows deleted. */
    public int purge() {
        return this.jdbc.update(this.purge, micros());
    }

    private long micros() {
        return TimeUnit.SECONDS.toMicros(this.retention.toSeconds());
    }

    /** Gives the connection back its own network timeout; a broken one, which the pool drops, keeps the record's. */
    private static void restore(Connection connection, Duration networkTimeout, int before) {
        if (networkTimeout.isZero()) {
            return;
        }
        try {
            if (!connection.isClosed()) {
                connection.setNetworkTimeout(Runnable::run, before);
            }
        } catch (SQLException ex) {
            // Broken: the record's own failure, if any, is what the caller sees.
        }
    }

    private static byte[] sha256(byte[] body) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(body);
        } catch (NoSuchAlgorithmException ex) {
            throw new IllegalStateException("Every Java platform has SHA-256", ex);
        }
    }
}
