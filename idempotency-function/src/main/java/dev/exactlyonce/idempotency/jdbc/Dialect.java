package dev.exactlyonce.idempotency.jdbc;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The SQL of one database (PostgreSQL or MariaDB, any other refused) for the inbox side of the library, chosen from
 * the DataSource's metadata once. See docs/reference.md, "Databases".
 */
public sealed interface Dialect permits PostgresDialect, MariaDbDialect {

    /**
     * The dialect of the database behind the DataSource, read from its metadata the first time, then remembered.
     *
     * @throws StartupRefusal when the database is not one the library supports
     */
    static Dialect of(DataSource dataSource) {
        Dialect known = Dialects.KNOWN.get(dataSource);
        if (known != null) {
            return known;
        }
        try (Connection connection = dataSource.getConnection()) {
            Dialect dialect = of(connection.getMetaData());
            Dialects.KNOWN.put(dataSource, dialect);
            return dialect;
        } catch (SQLException ex) {
            throw new IdempotencyException("Could not read which database the service uses: " + ex.getMessage(), ex);
        }
    }

    static Dialect of(DatabaseMetaData metadata) throws SQLException {
        String product = metadata.getDatabaseProductName();
        String name = product.toLowerCase(Locale.ROOT);
        if (name.contains("postgresql")) {
            return PostgresDialect.INSTANCE;
        }
        if (name.contains("mariadb")) {
            return MariaDbDialect.of(metadata.getDatabaseMajorVersion(), metadata.getDatabaseMinorVersion());
        }
        throw new StartupRefusal(
                "The service's database is %s %s, which the idempotency library does not support: it runs on %s"
                        .formatted(product, metadata.getDatabaseProductVersion(), SUPPORTED),
                "Run the service on one of those databases");
    }

    String SUPPORTED = "PostgreSQL, and MariaDB 10.7 or later";

    String product();

    default ProcessedEventStore processedEvents(JdbcTemplate jdbc, String table) {
        return processedEvents(jdbc, table, null);
    }

    /** The claims of the table, each setting the bounds of its transaction on the server, if any. */
    ProcessedEventStore processedEvents(JdbcTemplate jdbc, String table, @Nullable TransactionBounds bounds);

    /** The events dead-lettered by the guards of the table ({@code <table>_dead_letter}). */
    DeadLetterRecords deadLetters(JdbcTemplate jdbc, String table, Duration retention);

    /** Whether the schema ({@code null}: the connection's current one) holds the table. */
    boolean tableExists(JdbcTemplate jdbc, @Nullable String schema, String table);

    /** Whether the primary key of the table of claims holds {@code event_name} (version 5 of the schema). */
    boolean keyedByName(JdbcTemplate jdbc, String table);

    /**
     * Takes the session lock of the name for the table, on a connection in auto-commit: tried ({@code wait} false), or
     * waited for (without end on PostgreSQL; on MariaDB for 300 s, then it throws); {@code true} when taken.
     */
    boolean lock(JdbcTemplate jdbc, String name, String table, boolean wait);

    /** Runs the work in a transaction of its own that holds the lock of the name for the table throughout. */
    <T> T inTransactionLocked(DataSource dataSource, String name, String table, Function<JdbcTemplate, T> work);

    /** Releases the session lock taken by {@link #lock}, on the same connection. */
    void unlock(JdbcTemplate jdbc, String name, String table);

    /** The probe's claim, in a transaction the probe rolls back: its parameters are an event id and the scope. */
    String probeWrite(String table);

    /** Registers a scope in the registry, or marks it as used again (its copies no longer cover it). */
    String registerScope(String registry);

    /** Copies the claims of a former scope to the scopes that take it over; the rows written. */
    int copyClaims(JdbcTemplate jdbc, String table, String former, List<String> heirs);

    /** The purge's cutoff, {@code retention} before the database's clock; its parameter is the retention in µs. */
    String purgeCutoff();

    /** A nullable point-in-time column, as the library's tables declare it, for a refusal's {@code ALTER TABLE}. */
    String nullableTimestampColumn();

    /** Deletes one batch of the oldest rows before the cutoff; its parameters are the cutoff and the batch size. */
    String purgeBatch(String table);

    /** The endpoint's figures of the table, its partitions included. */
    TableSize tableSize(JdbcTemplate jdbc, String table);

    /** The database's estimate of the table's rows, and its size on disk, indexes included. */
    record TableSize(long rows, long bytes) {}

    /** Where the library's Flyway migrations of this database are. */
    List<String> migrations(boolean partitioned);

    /** What this database lacks of a feature a setting asks for; {@code null} when it has it. */
    @Nullable
    String lacks(Feature feature);

    /** Refuses to start a setting that asks for a feature this database lacks; {@code action}: what to set instead. */
    default void require(Feature feature, String action) {
        String lacked = lacks(feature);
        if (lacked != null) {
            throw new StartupRefusal(lacked + ", and the service's database is " + product(), action);
        }
    }

    /** The dialects of the DataSources seen: a DataSource no longer used goes, with its dialect. */
    final class Dialects {

        private static final Map<DataSource, Dialect> KNOWN = Collections.synchronizedMap(new WeakHashMap<>());

        private Dialects() {}
    }

    enum Feature {
        PARTITIONING
    }
}
