package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowCallbackHandler;

/** The outbox's statements on PostgreSQL: partition locks are transaction-scoped advisory locks, rows go as arrays. */
final class PostgresOutbox implements OutboxStatements {

    public static final PostgresOutbox INSTANCE = new PostgresOutbox();

    /**
     * Locks the rows' keys (outbox_key rows, inserted where new, ascending), then inserts the rows in the order
     * written; the one-time filter takes the locks before the first row takes its position.
     */
    private static final String INSERT = """
            WITH key_locks AS (
                INSERT INTO outbox_key (aggregatetype, aggregateid)
                SELECT DISTINCT destination, key FROM unnest(?::text[], ?::text[]) AS written (destination, key)
                ORDER BY 1, 2
                ON CONFLICT (aggregatetype, aggregateid) DO UPDATE SET aggregatetype = excluded.aggregatetype WHERE false
                RETURNING 1)
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at)
            SELECT event.id, event.destination, event.key, event.name, event.payload::jsonb, event.occurred_at
            FROM unnest(?::uuid[], ?::text[], ?::text[], ?::text[], ?::text[], ?::timestamptz[])
                     WITH ORDINALITY AS event (id, destination, key, name, payload, occurred_at, n)
            WHERE (SELECT count(*) FROM key_locks) >= 0
            ORDER BY event.n""";

    private static final String REPUBLISH = """
            UPDATE outbox_event
            SET published_at = NULL, publishable_at = clock_timestamp(),
                attempts = 0, next_attempt_at = NULL, last_error = NULL, parked_at = NULL
            WHERE occurred_at >= ? AND occurred_at < ? AND published_at IS NOT NULL AND skipped_at IS NULL""";

    /** What the relay reads of a key's head ({@code head}), as {@link #head} maps it. */
    private static final String HEAD = """
            head.aggregatetype, head.aggregateid, head.type, head.position,
            hashtext(head.aggregatetype || ':' || head.aggregateid) & %d,
            head.attempts > 0 AND (head.parked_at IS NOT NULL OR head.next_attempt_at > now()),
            head.attempts > 0 AND head.parked_at IS NOT NULL, head.publishable_at,
            extract(epoch FROM clock_timestamp() - head.publishable_at)""".formatted(OutboxRelay.PARTITIONS - 1);

    /** The head of every key that has one, by a skip scan of the pending rows' key index: one probe per key. */
    static final String HEADS = """
            WITH RECURSIVE heads AS (
                (SELECT aggregatetype, aggregateid, position, 1 AS n FROM outbox_event
                 WHERE published_at IS NULL AND (aggregatetype, aggregateid) > (?, ?)
                 ORDER BY aggregatetype, aggregateid, position LIMIT 1)
              UNION ALL
                SELECT next.aggregatetype, next.aggregateid, next.position, heads.n + 1
                FROM heads CROSS JOIN LATERAL (
                    SELECT aggregatetype, aggregateid, position FROM outbox_event
                    WHERE published_at IS NULL AND (aggregatetype, aggregateid) > (heads.aggregatetype, heads.aggregateid)
                    ORDER BY aggregatetype, aggregateid, position LIMIT 1) AS next)
            SELECT %s
            FROM (SELECT * FROM heads LIMIT ?) AS heads
            JOIN outbox_event head ON head.position = heads.position AND head.published_at IS NULL
            ORDER BY heads.n""".formatted(HEAD);

    /**
     * The head of each key past a position below which its rows are published: the probe starts past them, which a
     * transaction held open keeps in the index until it ends.
     */
    static final String HEADS_PAST = """
            SELECT %s
            FROM unnest(?::text[], ?::text[], ?::bigint[])
                     WITH ORDINALITY AS known (aggregatetype, aggregateid, past, n)
            CROSS JOIN LATERAL (
                SELECT * FROM outbox_event
                WHERE aggregatetype = known.aggregatetype AND aggregateid = known.aggregateid
                  AND published_at IS NULL AND position > known.past
                ORDER BY position LIMIT 1) AS head
            ORDER BY known.n""".formatted(HEAD);

    /**
     * The keys of the unpublished rows whose transactions the last read's snapshot did not see (running, or begun
     * after it), with their lowest positions, and this read's snapshot: gap-safe, whatever order positions commit in.
     * Rows without a transaction (written by a script that set none) are read each time.
     */
    static final String NEW_ROWS = """
            WITH seen AS (SELECT txid_current_snapshot() AS snapshot)
            SELECT seen.snapshot::text, written.aggregatetype, written.aggregateid, written.position
            FROM seen LEFT JOIN (
                SELECT aggregatetype, aggregateid, min(position) AS position FROM outbox_event
                WHERE published_at IS NULL
                  AND (written_xid >= txid_snapshot_xmax(?::txid_snapshot)
                       OR written_xid = ANY (ARRAY(SELECT txid_snapshot_xip(?::txid_snapshot)))
                       OR written_xid IS NULL)
                GROUP BY aggregatetype, aggregateid) AS written ON true""";

    private static final String IDLE_LIMIT = """
            SELECT set_config('idle_in_transaction_session_timeout', ?, true)""";

    private static final String LOCK = """
            SELECT partition FROM unnest(?::int[]) AS partition
            WHERE pg_try_advisory_xact_lock(hashtext('dev.exactlyonce.idempotency.outbox:' || 'outbox_event'::regclass::oid), partition)""";

    private static final String PENDING = """
            SELECT event.id, event.aggregatetype, event.aggregateid, event.type, event.payload::text, event.occurred_at,
                   event.attempts > 0 AND (event.parked_at IS NOT NULL OR event.next_attempt_at > now())
            FROM unnest(?::text[], ?::text[], ?::bigint[]) AS pending (aggregatetype, aggregateid, head)
            CROSS JOIN LATERAL (
                SELECT * FROM outbox_event
                WHERE aggregatetype = pending.aggregatetype AND aggregateid = pending.aggregateid
                  AND published_at IS NULL AND position >= pending.head
                ORDER BY position LIMIT ?) AS event
            ORDER BY event.position""";

    private static final String MARK = """
            UPDATE outbox_event SET published_at = now() WHERE id = ANY (?)""";

    private static final String REFUSED = """
            UPDATE outbox_event
            SET attempts = attempts + 1, last_error = refused.reason,
                next_attempt_at = clock_timestamp()
                    + make_interval(secs => least(? * power(2, least(attempts, 30)), ?)),
                parked_at = CASE WHEN attempts + 1 >= ? THEN clock_timestamp() END
            FROM unnest(?::uuid[], ?::text[]) AS refused (id, reason)
            WHERE outbox_event.id = refused.id
            RETURNING outbox_event.id, outbox_event.aggregateid, outbox_event.attempts, outbox_event.parked_at IS NOT NULL,
                      extract(epoch FROM outbox_event.next_attempt_at - clock_timestamp())""";

    private static final String HELD = """
            SELECT count(*) FILTER (WHERE parked_at IS NOT NULL),
                   extract(epoch FROM min(next_attempt_at) FILTER (WHERE parked_at IS NULL) - clock_timestamp()),
                   coalesce(extract(epoch FROM clock_timestamp() - min(publishable_at) FILTER (WHERE parked_at IS NULL)), 0)
            FROM outbox_event WHERE published_at IS NULL AND attempts > 0""";

    private static final String UNPUBLISHED = """
            SELECT count(*) FROM (SELECT 1 FROM outbox_event WHERE published_at IS NULL LIMIT %d) AS counted""".formatted(OutboxBacklog.COUNTED);

    /**
     * The age is checked again on the row deleted: a row that {@code Outbox.republish} marked unpublished while the
     * delete waited for it is left, since PostgreSQL re-checks only the outer condition on a row updated meanwhile.
     */
    private static final String DELETE_PUBLISHED = """
            DELETE FROM outbox_event WHERE id IN (
                SELECT id FROM outbox_event
                WHERE published_at < now() - make_interval(secs => ?) ORDER BY published_at LIMIT ?)
            AND published_at < now() - make_interval(secs => ?)""";

    /** Without the relay, nothing marks rows published: Debezium reads them from the write-ahead log once committed. */
    private static final String DELETE_WRITTEN = """
            DELETE FROM outbox_event WHERE id IN (
                SELECT id FROM outbox_event
                WHERE occurred_at < now() - make_interval(secs => ?) ORDER BY occurred_at LIMIT ?)
            AND occurred_at < now() - make_interval(secs => ?)""";

    /** Skips the keys a writer holds: the purge never waits for one, nor makes one wait. */
    private static final String DELETE_KEYS = """
            DELETE FROM outbox_key WHERE ctid IN (
                SELECT ctid FROM outbox_key WHERE created_at < now() - make_interval(secs => ?) LIMIT ?
                FOR UPDATE SKIP LOCKED)""";

    private static final String REGISTER_PUBLISHER = """
            INSERT INTO outbox_publisher (publisher) VALUES (?) ON CONFLICT DO NOTHING""";

    /** Whether {@code written_xid} is there, with its default, and the trigger that sets it on a row unpublished. */
    private static final String WRITTEN_XID = """
            SELECT EXISTS (
                       SELECT 1 FROM pg_attribute JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
                       WHERE attrelid = to_regclass('outbox_event') AND attname = 'written_xid' AND NOT attisdropped
                         AND pg_get_expr(adbin, adrelid) LIKE 'txid_current()%')
               AND EXISTS (
                       SELECT 1 FROM pg_trigger
                       WHERE tgrelid = to_regclass('outbox_event') AND tgname = 'outbox_event_unpublished'
                         AND tgenabled IN ('O', 'A'))""";

    private PostgresOutbox() {}

    /** The relay reads the rows written, or made unpublished, since its last read by {@code written_xid}. */
    @Override
    public void checkSchema(JdbcTemplate jdbc, boolean relayed) {
        if (relayed && !Boolean.TRUE.equals(jdbc.queryForObject(WRITTEN_XID, Boolean.class))) {
            throw new StartupRefusal(
                    "The outbox_event table has no written_xid column defaulting to txid_current(), or no enabled"
                            + " trigger outbox_event_unpublished setting it on a row made unpublished again: the relay"
                            + " reads by it the rows committed since its last read",
                    "Add them as the library's migration db/idempotency/postgresql-common/V9__outbox_written_xid.sql"
                            + " does (the library's Flyway migrations do when the service migrates with Flyway;"
                            + " schema-postgresql.sql has them), or enable the trigger");
        }
    }

    @Override
    public void insert(JdbcTemplate jdbc, List<Row> rows) {
        String[] destinations = rows.stream().map(Row::destination).toArray(String[]::new);
        String[] keys = rows.stream().map(Row::key).toArray(String[]::new);
        jdbc.update(
                INSERT,
                destinations,
                keys,
                rows.stream().map(Row::id).toArray(UUID[]::new),
                destinations,
                keys,
                rows.stream().map(Row::name).toArray(String[]::new),
                rows.stream().map(Row::payload).toArray(String[]::new),
                rows.stream().map(row -> Timestamp.from(row.occurredAt())).toArray(Timestamp[]::new));
    }

    @Override
    public int republish(JdbcTemplate jdbc, Timestamp from, Timestamp to) {
        return jdbc.update(REPUBLISH, from, to);
    }

    /** The setting lasts for the transaction: nothing to set back. */
    @Override
    public @Nullable String limitIdleTime(Connection connection, Duration limit) throws SQLException {
        try (PreparedStatement statement = connection.prepareStatement(IDLE_LIMIT)) {
            statement.setString(1, limit.toMillis() + "ms");
            statement.execute();
        }
        return null;
    }

    @Override
    public Heads heads(JdbcTemplate jdbc, @Nullable Object after, int maxKeys) {
        String[] from = after instanceof String[] key ? key : new String[] {"", ""};
        List<Head> heads = jdbc.query(HEADS, PostgresOutbox::head, from[0], from[1], maxKeys);
        Head last = heads.size() == maxKeys ? heads.get(heads.size() - 1) : null;
        return new Heads(heads, last != null ? new String[] {last.destination(), last.key()} : null);
    }

    @Override
    public List<Head> headsPast(JdbcTemplate jdbc, List<KeyPosition> keys) {
        return jdbc.query(
                HEADS_PAST,
                PostgresOutbox::head,
                keys.stream().map(KeyPosition::destination).toArray(String[]::new),
                keys.stream().map(KeyPosition::key).toArray(String[]::new),
                keys.stream().map(KeyPosition::position).toArray(Long[]::new));
    }

    @Override
    public NewRows newRows(JdbcTemplate jdbc, @Nullable Object since) {
        // The first read only takes the snapshot: what was committed before it is read in full (heads).
        String snapshot = since instanceof String last ? last : null;
        List<KeyPosition> keys = new ArrayList<>();
        String[] now = new String[1];
        jdbc.query(
                since == null ? "SELECT txid_current_snapshot()::text, NULL, NULL, NULL" : NEW_ROWS,
                row -> {
                    now[0] = row.getString(1);
                    if (row.getString(2) != null) {
                        keys.add(new KeyPosition(row.getString(2), row.getString(3), row.getLong(4)));
                    }
                },
                since == null ? new Object[0] : new Object[] {snapshot, snapshot});
        return new NewRows(keys, Objects.requireNonNull(now[0]));
    }

    private static Head head(ResultSet row, int index) throws SQLException {
        return new Head(
                row.getString(1),
                row.getString(2),
                row.getString(3),
                row.getLong(4),
                row.getInt(5),
                row.getBoolean(6),
                row.getBoolean(7),
                row.getTimestamp(8).toInstant(),
                row.getDouble(9));
    }

    @Override
    public List<Integer> lockPartitions(JdbcTemplate jdbc, List<Integer> partitions) {
        return jdbc.queryForList(LOCK, Integer.class, (Object) partitions.toArray(Integer[]::new));
    }

    @Override
    public List<OutboxSender.Row> pending(JdbcTemplate jdbc, List<Head> keys, int perKey) {
        return OutboxStatements.withoutHeldKeys(jdbc.query(
                PENDING,
                (row, index) -> new Pending(
                        new OutboxSender.Row(
                                row.getObject(1, UUID.class),
                                row.getString(2),
                                row.getString(3),
                                row.getString(4),
                                row.getString(5),
                                row.getTimestamp(6).toInstant()),
                        row.getBoolean(7)),
                keys.stream().map(Head::destination).toArray(String[]::new),
                keys.stream().map(Head::key).toArray(String[]::new),
                keys.stream().map(Head::position).toArray(Long[]::new),
                perKey));
    }

    @Override
    public void markPublished(JdbcTemplate jdbc, List<UUID> ids) {
        jdbc.update(MARK, (Object) ids.toArray(UUID[]::new));
    }

    @Override
    public void holdBack(
            JdbcTemplate jdbc,
            List<OutboxSender.Refusal> refusals,
            int maxAttempts,
            Duration first,
            Duration longest,
            RowCallbackHandler refused) {
        jdbc.query(
                REFUSED,
                refused,
                first.toNanos() / 1e9,
                longest.toNanos() / 1e9,
                maxAttempts,
                refusals.stream().map(refusal -> refusal.row().id()).toArray(UUID[]::new),
                refusals.stream().map(OutboxSender.Refusal::reason).toArray(String[]::new));
    }

    @Override
    public String held() {
        return HELD;
    }

    @Override
    public long unpublished(JdbcTemplate jdbc) {
        Long count = jdbc.queryForObject(UNPUBLISHED, Long.class);
        return count != null ? count : 0;
    }

    @Override
    public int purgeBatch(JdbcTemplate jdbc, boolean published, Duration retention, int batchSize) {
        double age = retention.toSeconds();
        return jdbc.update(published ? DELETE_PUBLISHED : DELETE_WRITTEN, age, batchSize, age);
    }

    @Override
    public int purgeKeysBatch(JdbcTemplate jdbc, Duration retention, int batchSize) {
        return jdbc.update(DELETE_KEYS, (double) retention.toSeconds(), batchSize);
    }

    @Override
    public String registerPublisher() {
        return REGISTER_PUBLISHER;
    }
}
