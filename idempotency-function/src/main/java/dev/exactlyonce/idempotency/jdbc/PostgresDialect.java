package dev.exactlyonce.idempotency.jdbc;

import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * PostgreSQL's statements. A claim is {@code INSERT ... ON CONFLICT DO NOTHING}, a batch's claim one such statement
 * over {@code unnest} of arrays; session locks are advisory locks of the hashes of their name and table.
 */
public final class PostgresDialect implements Dialect {

    public static final PostgresDialect INSTANCE = new PostgresDialect();

    private static final String TABLE_EXISTS = """
            SELECT to_regclass(?) IS NOT NULL""";

    private static final String KEYED_BY_NAME = """
            SELECT EXISTS (SELECT 1 FROM pg_index i
                           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                           WHERE i.indrelid = to_regclass(?) AND i.indisprimary AND a.attname = 'event_name')""";

    private static final String TRY_LOCK = "SELECT pg_try_advisory_lock(hashtext(?), hashtext(?))";

    private static final String LOCK = "SELECT pg_advisory_lock(hashtext(?), hashtext(?))::text";

    private static final String TRANSACTION_LOCK = "SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))::text";

    private static final String UNLOCK = "SELECT pg_advisory_unlock(hashtext(?), hashtext(?))";

    private static final String PROBE_WRITE = """
            INSERT INTO %s (event_id, scope) VALUES (?, ?) ON CONFLICT DO NOTHING""";

    private static final String REGISTER_SCOPE = """
            INSERT INTO %s (scope) VALUES (?) ON CONFLICT (scope) DO UPDATE SET copied_to = NULL""";

    private static final String COPY_CLAIMS = """
            INSERT INTO %1$s (event_id, scope, event_name, processed_at)
            SELECT former.event_id, heir.scope, former.event_name, former.processed_at
            FROM %1$s AS former CROSS JOIN unnest(?::text[]) AS heir(scope)
            WHERE former.scope = ?
            ON CONFLICT DO NOTHING""";

    private static final String PURGE_CUTOFF = """
            SELECT now() - ? * interval '1 microsecond'""";

    private static final String RECORD_DEAD_LETTER = """
            INSERT INTO %s (binding, event_id, event_name, body_sha256) VALUES (?, ?::uuid, ?, ?)
            ON CONFLICT DO NOTHING""";

    private static final String DEAD_LETTER_RECORDED = """
            SELECT EXISTS (SELECT 1 FROM %s WHERE binding = ? AND event_id = ?::uuid AND event_name = ?
                AND body_sha256 = ? AND dead_lettered_at > now() - ? * interval '1 microsecond')""";

    private static final String DEAD_LETTER_TAKEN_BACK = """
            UPDATE %s SET taken_back_at = coalesce(taken_back_at, now())
            WHERE binding = ? AND event_id = ?::uuid AND event_name = ? AND body_sha256 = ?""";

    private static final String DEAD_LETTERS_WAITING = """
            SELECT count(*), min(dead_lettered_at) FROM %s
            WHERE taken_back_at IS NULL AND dead_lettered_at > now() - ? * interval '1 microsecond'""";

    private static final String DEAD_LETTERS_OLDEST = """
            SELECT event_id, dead_lettered_at FROM %s
            WHERE taken_back_at IS NULL AND dead_lettered_at > now() - ? * interval '1 microsecond'
            ORDER BY dead_lettered_at LIMIT ?""";

    private static final String PURGE_DEAD_LETTERS = """
            DELETE FROM %s WHERE dead_lettered_at < now() - ? * interval '1 microsecond'""";

    private static final String PURGE_BATCH = """
            DELETE FROM %1$s WHERE (event_id, scope, event_name) IN (
                SELECT event_id, scope, event_name FROM %1$s WHERE processed_at < ? ORDER BY processed_at LIMIT ?)""";

    private static final String TABLE_SIZE = """
            SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint AS rows,
                   coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes
            FROM pg_class c
            WHERE c.oid = to_regclass(?)
               OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(?))""";

    private PostgresDialect() {}

    @Override
    public String product() {
        return "PostgreSQL";
    }

    @Override
    public ProcessedEventStore processedEvents(JdbcTemplate jdbc, String table, @Nullable TransactionBounds bounds) {
        return new Claims(jdbc, table, bounds);
    }

    @Override
    public DeadLetterRecords deadLetters(JdbcTemplate jdbc, String table, Duration retention) {
        return new DeadLetterRecords(
                jdbc,
                table,
                retention,
                RECORD_DEAD_LETTER,
                DEAD_LETTER_RECORDED,
                DEAD_LETTER_TAKEN_BACK,
                DEAD_LETTERS_WAITING,
                DEAD_LETTERS_OLDEST,
                PURGE_DEAD_LETTERS);
    }

    @Override
    public boolean tableExists(JdbcTemplate jdbc, @Nullable String schema, String table) {
        String name = schema != null ? "\"" + schema + "\"." + table : table;
        return Boolean.TRUE.equals(jdbc.queryForObject(TABLE_EXISTS, Boolean.class, name));
    }

    @Override
    public boolean keyedByName(JdbcTemplate jdbc, String table) {
        return Boolean.TRUE.equals(jdbc.queryForObject(KEYED_BY_NAME, Boolean.class, table));
    }

    @Override
    public boolean lock(JdbcTemplate jdbc, String name, String table, boolean wait) {
        if (wait) {
            jdbc.queryForObject(LOCK, String.class, name, table);
            return true;
        }
        return Boolean.TRUE.equals(jdbc.queryForObject(TRY_LOCK, Boolean.class, name, table));
    }

    /** Under a transaction-scoped advisory lock: nothing outlives the transaction, whatever pools the connections. */
    @Override
    public <T> T inTransactionLocked(DataSource dataSource, String name, String table, Function<JdbcTemplate, T> work) {
        TransactionTemplate transaction = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
        return transaction.execute(status -> {
            JdbcTemplate jdbc = new JdbcTemplate(dataSource);
            jdbc.queryForObject(TRANSACTION_LOCK, String.class, name, table);
            return work.apply(jdbc);
        });
    }

    @Override
    public void unlock(JdbcTemplate jdbc, String name, String table) {
        jdbc.queryForObject(UNLOCK, Boolean.class, name, table);
    }

    @Override
    public String probeWrite(String table) {
        return PROBE_WRITE.formatted(table);
    }

    @Override
    public String registerScope(String registry) {
        return REGISTER_SCOPE.formatted(registry);
    }

    @Override
    public int copyClaims(JdbcTemplate jdbc, String table, String former, List<String> heirs) {
        return jdbc.update(connection -> {
            PreparedStatement statement = connection.prepareStatement(COPY_CLAIMS.formatted(table));
            statement.setArray(1, connection.createArrayOf("text", heirs.toArray()));
            statement.setString(2, former);
            return statement;
        });
    }

    @Override
    public String purgeCutoff() {
        return PURGE_CUTOFF;
    }

    @Override
    public String nullableTimestampColumn() {
        return "timestamptz";
    }

    @Override
    public String purgeBatch(String table) {
        return PURGE_BATCH.formatted(table);
    }

    @Override
    public TableSize tableSize(JdbcTemplate jdbc, String table) {
        return jdbc.queryForObject(
                TABLE_SIZE, (row, index) -> new TableSize(row.getLong("rows"), row.getLong("bytes")), table, table);
    }

    @Override
    public List<String> migrations(boolean partitioned) {
        return List.of(
                partitioned ? "classpath:db/idempotency/postgresql-partitioned" : "classpath:db/idempotency/postgresql",
                "classpath:db/idempotency/postgresql-common");
    }

    @Override
    public @Nullable String lacks(Feature feature) {
        return null;
    }

    /** Bounds are set in the claim's statement, for the transaction: no round trip, and in force while it waits. */
    static final class Claims extends ProcessedEventStore {

        // A row of an earlier version ('' for the name) is a claim of its id under any name; only instances of an
        // earlier version write such rows, stopped before upgrading, so looking for one needs no lock.
        private static final String CLAIM = """
                INSERT INTO %1$s (event_id, scope, event_name) SELECT ?, ?, ?%2$s
                WHERE NOT EXISTS (SELECT FROM %1$s WHERE event_id = ? AND scope = ? AND event_name = '')
                ON CONFLICT DO NOTHING""";

        // In the keys' order, so that two batches that share events never deadlock (40P01).
        private static final String CLAIM_ALL = """
                INSERT INTO %1$s (event_id, scope, event_name)
                SELECT event.id, ?, event.name FROM unnest(?::uuid[], ?::text[]) AS event(id, name)%2$s
                WHERE NOT EXISTS (SELECT FROM %1$s AS earlier
                                  WHERE earlier.event_id = event.id AND earlier.scope = ? AND earlier.event_name = '')
                ORDER BY event.id, event.name
                ON CONFLICT DO NOTHING RETURNING event_id, event_name""";

        // Lowers the transaction's lock, statement and idle bounds to those in ms, unless lower already (0 is none).
        // The planner may skip it for a duplicate of an earlier version's row, whose transaction then waits on nothing.
        private static final String BOUND = """

                    CROSS JOIN (SELECT count(set_config(name, ms || 'ms', true))
                                FROM (VALUES ('lock_timeout', ?::bigint),
                                             ('statement_timeout', ?::bigint),
                                             ('idle_in_transaction_session_timeout', ?::bigint)) AS wanted(name, ms)
                                WHERE current_setting(name)::interval = interval '0'
                                   OR current_setting(name)::interval > ms * interval '1 millisecond') AS bound""";

        private final String claimSql;

        private final String claimAllSql;

        private final @Nullable TransactionBounds bounds;

        Claims(JdbcTemplate jdbcTemplate, String tableName, @Nullable TransactionBounds bounds) {
            super(jdbcTemplate, tableName);
            this.bounds = bounds;
            String bound = bounds != null ? BOUND : "";
            this.claimSql = CLAIM.formatted(tableName, bounds != null ? " FROM (SELECT 1) AS one" + bound : "");
            this.claimAllSql = CLAIM_ALL.formatted(tableName, bound);
        }

        @Override
        public boolean claim(Key event, String scope) {
            return this.jdbcTemplate.update(connection -> {
                        PreparedStatement statement = connection.prepareStatement(this.claimSql);
                        statement.setObject(1, event.eventId());
                        statement.setString(2, scope);
                        statement.setString(3, event.eventName());
                        int next = bind(statement, 4);
                        statement.setObject(next, event.eventId());
                        statement.setString(next + 1, scope);
                        return statement;
                    })
                    == 1;
        }

        /** Binds the bounds' milliseconds from that parameter on, if any; the next parameter. */
        private int bind(PreparedStatement statement, int parameter) throws SQLException {
            if (this.bounds == null) {
                return parameter;
            }
            statement.setLong(parameter, this.bounds.lockTimeout().toMillis());
            statement.setLong(parameter + 1, this.bounds.statementTimeout().toMillis());
            statement.setLong(parameter + 2, this.bounds.idleTimeout().toMillis());
            return parameter + 3;
        }

        @Override
        public Set<Key> claimAll(Collection<Key> events, String scope) {
            List<Key> claimed = this.jdbcTemplate.query(
                    connection -> {
                        PreparedStatement statement = connection.prepareStatement(this.claimAllSql);
                        statement.setString(1, scope);
                        statement.setArray(
                                2,
                                connection.createArrayOf(
                                        "uuid",
                                        events.stream().map(Key::eventId).toArray()));
                        statement.setArray(
                                3,
                                connection.createArrayOf(
                                        "text",
                                        events.stream().map(Key::eventName).toArray()));
                        statement.setString(bind(statement, 4), scope);
                        return statement;
                    },
                    (row, index) -> new Key(row.getObject(1, UUID.class), row.getString(2)));
            return new HashSet<>(claimed);
        }
    }
}
