package dev.exactlyonce.idempotency.jdbc;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * MariaDB's statements (10.7 or later). A claim writes a random token it reads back, since MariaDB's row counts cannot
 * tell an insert from a duplicate; session locks are the server's named locks. See docs/reference.md, "Databases".
 */
public final class MariaDbDialect implements Dialect {

    private static final MariaDbDialect INSTANCE = new MariaDbDialect();

    /** Lowers the session's bounds to the seconds given, unless lower already (0, for a statement or idle, is none). */
    private static final String BOUND_SESSION = """
            SET SESSION innodb_lock_wait_timeout = LEAST(@@session.innodb_lock_wait_timeout, ?),
                max_statement_time = IF(@@session.max_statement_time = 0, ?, LEAST(@@session.max_statement_time, ?)),
                idle_transaction_timeout = IF(@@session.idle_transaction_timeout = 0, ?,
                                              LEAST(@@session.idle_transaction_timeout, ?))
            """;

    private static final String TABLE_EXISTS = """
            SELECT EXISTS (SELECT 1 FROM information_schema.tables
                           WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?)""";

    private static final String KEYED_BY_NAME = """
            SELECT EXISTS (SELECT 1 FROM information_schema.key_column_usage
                           WHERE table_schema = DATABASE() AND table_name = ? AND constraint_name = 'PRIMARY'
                             AND column_name = 'event_name')""";

    private static final String LOCK_NAME = "SHA1(CONCAT_WS('/', DATABASE(), ?, ?))";

    private static final String LOCK = "SELECT GET_LOCK(" + LOCK_NAME + ", ?)";

    private static final String UNLOCK = "SELECT RELEASE_LOCK(" + LOCK_NAME + ")";

    /** How long a session lock is waited for, in seconds, when it is waited for. */
    private static final int LOCK_WAIT = 300;

    private static final String PROBE_WRITE = """
            INSERT INTO %s (event_id, scope) VALUES (?, ?) ON DUPLICATE KEY UPDATE event_id = event_id""";

    private static final String REGISTER_SCOPE = """
            INSERT INTO %s (scope) VALUES (?) ON DUPLICATE KEY UPDATE copied_to = NULL""";

    private static final String COPY_CLAIMS = """
            INSERT INTO %1$s (event_id, scope, event_name, processed_at)
            SELECT former.event_id, ?, former.event_name, former.processed_at FROM %1$s AS former
            WHERE former.scope = ?
            ON DUPLICATE KEY UPDATE event_id = VALUES(event_id)""";

    private static final String PURGE_CUTOFF = """
            SELECT NOW(6) - INTERVAL ? MICROSECOND""";

    private static final String RECORD_DEAD_LETTER = """
            INSERT INTO %s (binding, event_id, event_name, body_sha256) VALUES (?, ?, ?, ?)
            ON DUPLICATE KEY UPDATE binding = binding""";

    private static final String DEAD_LETTER_RECORDED = """
            SELECT EXISTS (SELECT 1 FROM %s WHERE binding = ? AND event_id = ? AND event_name = ?
                AND body_sha256 = ? AND dead_lettered_at > NOW(6) - INTERVAL ? MICROSECOND)""";

    private static final String DEAD_LETTER_TAKEN_BACK = """
            UPDATE %s SET taken_back_at = COALESCE(taken_back_at, NOW(6))
            WHERE binding = ? AND event_id = ? AND event_name = ? AND body_sha256 = ?""";

    private static final String DEAD_LETTERS_WAITING = """
            SELECT COUNT(*), MIN(dead_lettered_at) FROM %s
            WHERE taken_back_at IS NULL AND dead_lettered_at > NOW(6) - INTERVAL ? MICROSECOND""";

    private static final String DEAD_LETTERS_OLDEST = """
            SELECT event_id, dead_lettered_at FROM %s
            WHERE taken_back_at IS NULL AND dead_lettered_at > NOW(6) - INTERVAL ? MICROSECOND
            ORDER BY dead_lettered_at LIMIT ?""";

    private static final String PURGE_DEAD_LETTERS = """
            DELETE FROM %s WHERE dead_lettered_at < NOW(6) - INTERVAL ? MICROSECOND""";

    private static final String PURGE_BATCH = """
            DELETE FROM %s WHERE processed_at < ? ORDER BY processed_at LIMIT ?""";

    private static final String TABLE_SIZE = """
            SELECT COALESCE(table_rows, 0), COALESCE(data_length + index_length, 0) FROM information_schema.tables
            WHERE table_schema = DATABASE() AND table_name = ?""";

    // The database's condition: disk full (1021), out of memory (1037, 1041), too many connections (1040), shutting
    // down (1053), read-only (1036, 1836, 1792), a connection killed (1927). Not one statement's (1038, 1114): those
    // would hold its message without end.
    private static final Set<Integer> OUTAGE_CODES = Set.of(1021, 1037, 1041, 1040, 1053, 1036, 1836, 1792, 1927);

    // 1290: "running with the --<option> option so it cannot execute this statement", an outage for --read-only only.
    private static final int OPTION_PREVENTS_STATEMENT = 1290;

    // Conflicts: a lock wait timeout (1205), a deadlock (1213), a statement timeout (1969; 3024 on MySQL).
    private static final Set<Integer> CONFLICT_CODES = Set.of(1205, 1213, 1969, 3024);

    private MariaDbDialect() {}

    /** Whether MariaDB's error code says the database's condition (an outage), whatever its SQLSTATE. */
    public static boolean isOutage(SQLException failure) {
        int code = failure.getErrorCode();
        return OUTAGE_CODES.contains(code)
                || (code == OPTION_PREVENTS_STATEMENT
                        && String.valueOf(failure.getMessage()).contains("read-only"));
    }

    /** Whether MariaDB's error says the server is read-only: a primary demoted. */
    static boolean isReadOnly(SQLException failure) {
        int code = failure.getErrorCode();
        return code == 1792
                || code == 1836
                || (code == OPTION_PREVENTS_STATEMENT
                        && String.valueOf(failure.getMessage()).contains("read-only"));
    }

    /** Whether MariaDB's error code says a conflict with another transaction, which passes. */
    public static boolean isConflict(int errorCode) {
        return CONFLICT_CODES.contains(errorCode);
    }

    static MariaDbDialect of(int major, int minor) {
        if (major < 10 || (major == 10 && minor < 7)) {
            throw new StartupRefusal(
                    "The service's database is MariaDB %d.%d; the idempotency library needs 10.7 or later (the UUID"
                                    .formatted(major, minor)
                            + " type, INSERT ... RETURNING)",
                    "Upgrade MariaDB (the library is tested on 10.11, the long-term release)");
        }
        return INSTANCE;
    }

    @Override
    public String product() {
        return "MariaDB";
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
        return Boolean.TRUE.equals(jdbc.queryForObject(TABLE_EXISTS, Boolean.class, schema, table));
    }

    @Override
    public boolean keyedByName(JdbcTemplate jdbc, String table) {
        return Boolean.TRUE.equals(jdbc.queryForObject(KEYED_BY_NAME, Boolean.class, table));
    }

    @Override
    public boolean lock(JdbcTemplate jdbc, String name, String table, boolean wait) {
        Integer taken = jdbc.queryForObject(LOCK, Integer.class, name, table, wait ? LOCK_WAIT : 0);
        if (wait && !Integer.valueOf(1).equals(taken)) {
            throw new IdempotencyException(
                    "Waited %d s for the lock %s of %s in vain".formatted(LOCK_WAIT, name, table));
        }
        return Integer.valueOf(1).equals(taken);
    }

    /**
     * A named lock on a connection of its own, released after the transaction ends (MariaDB has no transaction lock);
     * READ COMMITTED, so that copying a former scope's claims locks none the guard claims meanwhile.
     */
    @Override
    public <T> T inTransactionLocked(DataSource dataSource, String name, String table, Function<JdbcTemplate, T> work) {
        try {
            return new SessionLock(dataSource, name, table).runWhenFree(jdbc -> {
                DataSource lockConnection = Objects.requireNonNull(jdbc.getDataSource());
                TransactionTemplate transaction =
                        new TransactionTemplate(new DataSourceTransactionManager(lockConnection));
                transaction.setIsolationLevel(TransactionDefinition.ISOLATION_READ_COMMITTED);
                return transaction.execute(status -> work.apply(jdbc));
            });
        } catch (SQLException ex) {
            throw new IdempotencyException("Could not lock %s of %s: %s".formatted(name, table, ex.getMessage()), ex);
        }
    }

    @Override
    public void unlock(JdbcTemplate jdbc, String name, String table) {
        jdbc.queryForObject(UNLOCK, Integer.class, name, table);
    }

    @Override
    public String probeWrite(String table) {
        return PROBE_WRITE.formatted(table);
    }

    @Override
    public String registerScope(String registry) {
        return REGISTER_SCOPE.formatted(registry);
    }

    /** One statement per heir; a row already there counts as written (MariaDB counts it found). */
    @Override
    public int copyClaims(JdbcTemplate jdbc, String table, String former, List<String> heirs) {
        int written = 0;
        for (String heir : heirs) {
            written += jdbc.update(COPY_CLAIMS.formatted(table), heir, former);
        }
        return written;
    }

    @Override
    public String purgeCutoff() {
        return PURGE_CUTOFF;
    }

    @Override
    public String nullableTimestampColumn() {
        return "TIMESTAMP(6) NULL DEFAULT NULL";
    }

    @Override
    public String purgeBatch(String table) {
        return PURGE_BATCH.formatted(table);
    }

    @Override
    public TableSize tableSize(JdbcTemplate jdbc, String table) {
        List<TableSize> sizes =
                jdbc.query(TABLE_SIZE, (row, index) -> new TableSize(row.getLong(1), row.getLong(2)), table);
        return sizes.isEmpty() ? new TableSize(0, 0) : sizes.get(0);
    }

    @Override
    public List<String> migrations(boolean partitioned) {
        return List.of("classpath:db/idempotency/mariadb");
    }

    @Override
    public @Nullable String lacks(Feature feature) {
        return switch (feature) {
            case PARTITIONING -> "Partitioned retention (idempotency.partitioning.enabled) runs on PostgreSQL only";
        };
    }

    /** A claim inserts, or updates nothing on a duplicate key, and returns the row's token: its own if it inserted. */
    static final class Claims extends ProcessedEventStore {

        private static final String INSERT = """
                INSERT INTO %s (event_id, scope, event_name, claim_token) VALUES """;

        private static final String ROW = "(?, ?, ?, ?)";

        private static final String ON_DUPLICATE = """
                 ON DUPLICATE KEY UPDATE event_id = event_id RETURNING event_id, event_name, claim_token""";

        // In one order, so that two batches that share events never deadlock (1213); ids compare as unsigned
        // 128-bit numbers (MariaDB's index orders them otherwise, which does not matter: no gap locks on the key).
        private static final Comparator<Key> ORDER = Comparator.comparing(
                        Key::eventId,
                        Comparator.comparing(UUID::getMostSignificantBits, Long::compareUnsigned)
                                .thenComparing(UUID::getLeastSignificantBits, Long::compareUnsigned))
                .thenComparing(Key::eventName);

        private final String insert;

        private final String claimSql;

        private final @Nullable TransactionBounds bounds;

        Claims(JdbcTemplate jdbcTemplate, String tableName, @Nullable TransactionBounds bounds) {
            super(jdbcTemplate, tableName);
            this.insert = INSERT.formatted(tableName);
            this.claimSql = this.insert + ROW + ON_DUPLICATE;
            this.bounds = bounds;
        }

        /** A round trip of its own: MariaDB can set no bound for a transaction, nor in the claim's statement. */
        private void bound() {
            TransactionBounds bounds = this.bounds;
            if (bounds == null) {
                return;
            }
            long idleSeconds = Math.max(1, bounds.idleTimeout().toSeconds());
            double statementSeconds = bounds.statementTimeout().toMillis() / 1000.0;
            this.jdbcTemplate.update(
                    BOUND_SESSION,
                    Math.max(1, bounds.lockTimeout().toSeconds()),
                    statementSeconds,
                    statementSeconds,
                    idleSeconds,
                    idleSeconds);
        }

        @Override
        public boolean claim(Key event, String scope) {
            bound();
            long token = token();
            List<Long> tokens = this.jdbcTemplate.query(
                    this.claimSql,
                    (row, index) -> row.getLong(3),
                    event.eventId().toString(),
                    scope,
                    event.eventName(),
                    token);
            return tokens.size() == 1 && tokens.get(0) == token;
        }

        @Override
        public Set<Key> claimAll(Collection<Key> events, String scope) {
            if (events.isEmpty()) {
                return Set.of();
            }
            bound();
            TreeSet<Key> keys = new TreeSet<>(ORDER);
            keys.addAll(events);
            long token = token();
            String sql = this.insert + String.join(", ", Collections.nCopies(keys.size(), ROW)) + ON_DUPLICATE;
            Set<Key> claimed = new HashSet<>();
            this.jdbcTemplate.query(
                    connection -> {
                        PreparedStatement statement = connection.prepareStatement(sql);
                        int parameter = 1;
                        for (Key key : keys) {
                            parameter = bind(statement, parameter, key, scope, token);
                        }
                        return statement;
                    },
                    row -> {
                        if (row.getLong(3) == token) {
                            claimed.add(new Key(UUID.fromString(row.getString(1)), row.getString(2)));
                        }
                    });
            return claimed;
        }

        private static int bind(PreparedStatement statement, int first, Key key, String scope, long token)
                throws SQLException {
            statement.setString(first, key.eventId().toString());
            statement.setString(first + 1, scope);
            statement.setString(first + 2, key.eventName());
            statement.setLong(first + 3, token);
            return first + 4;
        }

        /** A claim's token: random, never 0 (the token of the rows a scope's copy writes). */
        private static long token() {
            long token;
            do {
                token = ThreadLocalRandom.current().nextLong();
            } while (token == 0);
            return token;
        }
    }
}
