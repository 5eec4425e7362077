package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The database server the pipeline benchmark runs on, with what differs between PostgreSQL and MariaDB: the SQL of the
 * tables, of emptying them between scenarios, and of the guard's claim for the SQL-only reference.
 */
public sealed interface BenchDatabase permits PostgresServer, MariaDbServer {

    /** The server {@code --database} names ({@code postgresql}, the default, or {@code mariadb}). */
    public static BenchDatabase named(String name, Map<String, String> env) {
        return switch (name) {
            case "postgresql" -> PostgresServer.fromEnvironment(env);
            case "mariadb" -> MariaDbServer.fromEnvironment(env);
            default ->
                throw new IllegalArgumentException(
                        "Unknown database '%s'; the benchmark runs on postgresql or mariadb".formatted(name));
        };
    }

    /** The database's name, for the report. */
    String product();

    String url(String database);

    String user();

    String password();

    void createDatabase(String database) throws SQLException;

    void dropDatabase(String database) throws SQLException;

    HikariDataSource dataSource(String database, int poolSize);

    /** The library's schema script, and the peer's (Spring Integration's metadata store), if the peer runs here. */
    List<String> schemaScripts();

    /** The table the handlers write their effect to. */
    String effectTable();

    /** Empties the tables between scenarios (who publishes the outbox too: a scenario runs without the relay). */
    List<String> emptyTables();

    /** Has the database finish writing what a run left (a checkpoint), so that the next run does not pay for it. */
    default List<String> settle() {
        return List.of();
    }

    /** The guard's claim, as the library runs it. */
    String claim();

    /** Runs the claim of the event, prepared from {@link #claim()}. */
    void claim(PreparedStatement claim, UUID eventId, String eventName) throws SQLException;

    /** The scenarios that need what is not set up on this database (the peer's schema), with why. */
    Map<String, String> unsupported();
}
