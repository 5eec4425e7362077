package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.TableName;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.TreeSet;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowCallbackHandler;

/**
 * The outbox's statements on MariaDB, which has neither arrays nor transaction-scoped locks: the locks are rows of
 * {@code outbox_key} and {@code outbox_relay_lock} (the relay's tried with {@code SKIP LOCKED}). Times are the
 * server's ({@code NOW(6)}), read as epoch seconds, so that the JVM's time zone does not shift them.
 */
final class MariaDbOutbox implements OutboxStatements {

    public static final MariaDbOutbox INSTANCE = new MariaDbOutbox();

    private static final int ROWS_PER_INSERT = 1_000;

    /** The order of {@code utf8mb4_nopad_bin}: of the characters' code points (String's compareTo is UTF-16's). */
    private static final Comparator<String> BY_CODE_POINT = (one, other) -> {
        int[] a = one.codePoints().toArray();
        int[] b = other.codePoints().toArray();
        return Arrays.compare(a, b);
    };

    /** Inserts the keys that are new, and locks those that exist (without changing them), in the order given. */
    private static final String LOCK_KEYS = """
            INSERT INTO outbox_key (aggregatetype, aggregateid) VALUES %s
            ON DUPLICATE KEY UPDATE aggregatetype = aggregatetype""";

    private static final String INSERT = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, occurred_at) VALUES """;

    private static final String REPUBLISH = """
            UPDATE outbox_event
            SET published_at = NULL, publishable_at = NOW(6),
                attempts = 0, next_attempt_at = NULL, last_error = NULL, parked_at = NULL
            WHERE UNIX_TIMESTAMP(occurred_at) >= ? AND UNIX_TIMESTAMP(occurred_at) < ? AND published_at IS NOT NULL
              AND skipped_at IS NULL""";

    /** The head of every key with an unpublished row, by a loose scan of {@code pending_key}'s index. */
    private static final String HEADS = """
            SELECT head.aggregatetype, head.aggregateid, head.type, head.position,
                   CRC32(CONCAT(head.aggregatetype, ':', head.aggregateid)) & %d,
                   head.attempts > 0 AND (head.parked_at IS NOT NULL OR head.next_attempt_at > NOW(6)),
                   head.attempts > 0 AND head.parked_at IS NOT NULL, UNIX_TIMESTAMP(head.publishable_at),
                   TIMESTAMPDIFF(MICROSECOND, head.publishable_at, NOW(6)) / 1000000, heads.pending_key
            FROM (SELECT pending_key, MIN(position) AS position FROM outbox_event
                  WHERE pending_key > ? GROUP BY pending_key ORDER BY pending_key LIMIT ?) AS heads
            JOIN outbox_event head ON head.position = heads.position
            ORDER BY heads.pending_key""".formatted(OutboxRelay.PARTITIONS - 1);

    private static final String LOCK_PARTITIONS = """
            SELECT partition_no FROM outbox_relay_lock WHERE partition_no IN (%s) FOR UPDATE SKIP LOCKED""";

    /**
     * One key's oldest unpublished rows from its head, and which are held: the pending rows of several keys are their
     * union.
     */
    private static final String PENDING = """
            (SELECT id, aggregatetype, aggregateid, type, payload, UNIX_TIMESTAMP(occurred_at), position,
                    attempts > 0 AND (parked_at IS NOT NULL OR next_attempt_at > NOW(6))
             FROM outbox_event WHERE pending_key = CONCAT(?, CHAR(0 USING utf8mb4), ?) AND position >= ?
             ORDER BY position LIMIT ?)""";

    private static final String MARK = """
            UPDATE outbox_event SET published_at = NOW(6) WHERE id IN (%s)""";

    // MariaDB assigns in the order written, each assignment seeing the ones before: attempts goes last, so that the
    // others read the count before this attempt, as on PostgreSQL.
    private static final String REFUSED = """
            UPDATE outbox_event
            SET last_error = ?,
                next_attempt_at = NOW(6)
                    + INTERVAL CAST(LEAST(? * POW(2, LEAST(attempts, 30)), ?) AS UNSIGNED) MICROSECOND,
                parked_at = CASE WHEN attempts + 1 >= ? THEN NOW(6) END,
                attempts = attempts + 1
            WHERE id = ?""";

    private static final String REFUSED_NOW = """
            SELECT id, aggregateid, attempts, parked_at IS NOT NULL,
                   TIMESTAMPDIFF(MICROSECOND, NOW(6), next_attempt_at) / 1000000
            FROM outbox_event WHERE id IN (%s)""";

    private static final String HELD = """
            SELECT COALESCE(SUM(parked_at IS NOT NULL), 0),
                   TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(CASE WHEN parked_at IS NULL THEN next_attempt_at END))
                       / 1000000,
                   COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN parked_at IS NULL THEN publishable_at END), NOW(6))
                            / 1000000, 0)
            FROM outbox_event WHERE published_at IS NULL AND attempts > 0""";

    private static final String UNPUBLISHED = """
            SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event WHERE published_at IS NULL LIMIT %d) AS counted""".formatted(OutboxBacklog.COUNTED);

    private static final String DELETE_PUBLISHED = """
            DELETE FROM outbox_event WHERE published_at < NOW(6) - INTERVAL ? SECOND ORDER BY published_at LIMIT ?""";

    private static final String DELETE_WRITTEN = """
            DELETE FROM outbox_event WHERE occurred_at < NOW(6) - INTERVAL ? SECOND ORDER BY occurred_at LIMIT ?""";

    /** In the key's order, as the writers lock them: the purge and a writer cannot deadlock. */
    private static final String DELETE_KEYS = """
            DELETE FROM outbox_key WHERE created_at < NOW(6) - INTERVAL ? SECOND ORDER BY aggregatetype, aggregateid
            LIMIT ?""";

    private static final String REGISTER_PUBLISHER = """
            INSERT INTO outbox_publisher (publisher) VALUES (?) ON DUPLICATE KEY UPDATE publisher = publisher""";

    private MariaDbOutbox() {}

    /** Every partition has its lock row: a missing one would never be published. */
    @Override
    public void checkSchema(JdbcTemplate jdbc, boolean relayed) {
        if (relayed) {
            checkLockRows(jdbc, "outbox_relay_lock", "partition_no", OutboxRelay.PARTITIONS, "relay runs");
        }
    }

    private static void checkLockRows(JdbcTemplate jdbc, String table, String column, int slots, String lockedBy) {
        String fill = "INSERT INTO %1$s (%2$s) SELECT seq FROM seq_0_to_%3$d ON DUPLICATE KEY UPDATE %2$s = %2$s"
                .formatted(table, column, slots - 1);
        if (!TableName.exists(jdbc, table)) {
            throw new StartupRefusal(
                    "The schema has an outbox_event table but no %s table, whose rows the outbox's %s lock on MariaDB"
                            .formatted(table, lockedBy),
                    "Create it as the library's schema-mariadb.sql does, with its rows (" + fill + ")");
        }
        Integer rows = jdbc.queryForObject(
                "SELECT count(*) FROM %s WHERE %s BETWEEN 0 AND ?".formatted(table, column), Integer.class, slots - 1);
        if (rows == null || rows != slots) {
            throw new StartupRefusal(
                    ("%s holds %d of its %d rows (%s 0 to %d, one per lock slot the outbox's %s lock): a slot"
                                    + " without its row locks nothing")
                            .formatted(table, rows, slots, column, slots - 1, lockedBy),
                    "Add them as the library's schema-mariadb.sql does: " + fill);
        }
    }

    /** Locks the keys, sorted, then inserts the rows, {@value #ROWS_PER_INSERT} per statement (the server's limits). */
    @Override
    public void insert(JdbcTemplate jdbc, List<Row> rows) {
        if (rows.isEmpty()) {
            return;
        }
        TreeSet<List<String>> keys = new TreeSet<>(
                Comparator.comparing((List<String> key) -> key.get(0)).thenComparing(key -> key.get(1)));
        rows.forEach(row -> keys.add(List.of(row.destination(), row.key())));
        List<List<String>> sorted = new ArrayList<>(keys);
        for (int from = 0; from < sorted.size(); from += ROWS_PER_INSERT) {
            List<List<String>> chunk = sorted.subList(from, Math.min(sorted.size(), from + ROWS_PER_INSERT));
            jdbc.update(
                    LOCK_KEYS.formatted(String.join(", ", Collections.nCopies(chunk.size(), "(?, ?)"))),
                    chunk.stream().flatMap(List::stream).toArray());
        }
        for (int from = 0; from < rows.size(); from += ROWS_PER_INSERT) {
            List<Row> chunk = rows.subList(from, Math.min(rows.size(), from + ROWS_PER_INSERT));
            jdbc.update(connection -> {
                PreparedStatement statement = connection.prepareStatement(INSERT
                        + String.join(", ", Collections.nCopies(chunk.size(), "(?, ?, ?, ?, ?, FROM_UNIXTIME(?))")));
                int parameter = 1;
                for (Row row : chunk) {
                    statement.setString(parameter++, row.id().toString());
                    statement.setString(parameter++, row.destination());
                    statement.setString(parameter++, row.key());
                    statement.setString(parameter++, row.name());
                    statement.setString(parameter++, row.payload());
                    statement.setBigDecimal(parameter++, epochSeconds(row.occurredAt()));
                }
                return statement;
            });
        }
    }

    @Override
    public int republish(JdbcTemplate jdbc, Timestamp from, Timestamp to) {
        return jdbc.update(REPUBLISH, epochSeconds(from.toInstant()), epochSeconds(to.toInstant()));
    }

    private static BigDecimal epochSeconds(Instant instant) {
        return BigDecimal.valueOf(instant.getEpochSecond()).add(BigDecimal.valueOf(instant.getNano(), 9));
    }

    /** MariaDB's {@code idle_transaction_timeout} is the session's: set for the run, and set back once it ended. */
    @Override
    public String limitIdleTime(Connection connection, Duration limit) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            String previous;
            try (ResultSet session = statement.executeQuery("SELECT @@SESSION.idle_transaction_timeout")) {
                session.next();
                previous = Long.toString(session.getLong(1));
            }
            statement.execute("SET SESSION idle_transaction_timeout = " + Math.max(1, limit.toSeconds()));
            return previous;
        }
    }

    @Override
    public void liftIdleLimit(Connection connection, String previous) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.execute("SET SESSION idle_transaction_timeout = " + Long.parseLong(previous));
        }
    }

    @Override
    public Heads heads(JdbcTemplate jdbc, @Nullable Object after, int maxKeys) {
        String[] last = {null};
        List<Head> heads = jdbc.query(
                HEADS,
                (row, index) -> {
                    last[0] = row.getString(10);
                    return new Head(
                            row.getString(1),
                            row.getString(2),
                            row.getString(3),
                            row.getLong(4),
                            row.getInt(5),
                            row.getBoolean(6),
                            row.getBoolean(7),
                            instant(row.getBigDecimal(8)),
                            row.getDouble(9));
                },
                after instanceof String key ? key : "",
                maxKeys);
        return new Heads(heads, heads.size() == maxKeys ? last[0] : null);
    }

    @Override
    public List<Integer> lockPartitions(JdbcTemplate jdbc, List<Integer> partitions) {
        return jdbc.queryForList(
                LOCK_PARTITIONS.formatted(placeholders(partitions.size())), Integer.class, partitions.toArray());
    }

    @Override
    public List<OutboxSender.Row> pending(JdbcTemplate jdbc, List<Head> keys, int perKey) {
        List<Object> parameters = new ArrayList<>(keys.size() * 4);
        keys.forEach(head -> parameters.addAll(List.of(head.destination(), head.key(), head.position(), perKey)));
        return OutboxStatements.withoutHeldKeys(jdbc.query(
                String.join(" UNION ALL ", Collections.nCopies(keys.size(), PENDING)) + " ORDER BY 7",
                (row, index) -> new Pending(
                        new OutboxSender.Row(
                                row.getObject(1, UUID.class),
                                row.getString(2),
                                row.getString(3),
                                row.getString(4),
                                row.getString(5),
                                instant(row.getBigDecimal(6))),
                        row.getBoolean(8)),
                parameters.toArray()));
    }

    private static Instant instant(BigDecimal epochSeconds) {
        BigDecimal seconds = epochSeconds.setScale(0, RoundingMode.FLOOR);
        return Instant.ofEpochSecond(
                seconds.longValueExact(),
                epochSeconds.subtract(seconds).movePointRight(9).longValue());
    }

    @Override
    public void markPublished(JdbcTemplate jdbc, List<UUID> ids) {
        jdbc.update(
                MARK.formatted(placeholders(ids.size())),
                ids.stream().map(UUID::toString).toArray());
    }

    @Override
    public void holdBack(
            JdbcTemplate jdbc,
            List<OutboxSender.Refusal> refusals,
            int maxAttempts,
            Duration first,
            Duration longest,
            RowCallbackHandler refused) {
        for (OutboxSender.Refusal refusal : refusals) {
            jdbc.update(
                    REFUSED,
                    refusal.reason(),
                    first.toNanos() / 1_000,
                    longest.toNanos() / 1_000,
                    maxAttempts,
                    refusal.row().id().toString());
        }
        jdbc.query(
                REFUSED_NOW.formatted(placeholders(refusals.size())),
                refused,
                refusals.stream().map(refusal -> refusal.row().id().toString()).toArray());
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
        return jdbc.update(published ? DELETE_PUBLISHED : DELETE_WRITTEN, retention.toSeconds(), batchSize);
    }

    @Override
    public int purgeKeysBatch(JdbcTemplate jdbc, Duration retention, int batchSize) {
        return jdbc.update(DELETE_KEYS, retention.toSeconds(), batchSize);
    }

    @Override
    public String registerPublisher() {
        return REGISTER_PUBLISHER;
    }

    private static String placeholders(int count) {
        return String.join(", ", Collections.nCopies(count, "?"));
    }
}
