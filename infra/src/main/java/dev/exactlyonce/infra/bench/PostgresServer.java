package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The PostgreSQL server a benchmark runs on, named like the tests' ({@code PGHOST}, {@code PGPORT}, {@code PGUSER},
 * {@code PGPASSWORD}; by default {@code 127.0.0.1:5432} as {@code postgres}). Each benchmark works in a database of its
 * own, dropped at the end.
 */
public record PostgresServer(String host, int port, String user, String password) implements BenchDatabase {

    public static PostgresServer fromEnvironment(Map<String, String> env) {
        return new PostgresServer(
                env.getOrDefault("PGHOST", "127.0.0.1"),
                Integer.parseInt(env.getOrDefault("PGPORT", "5432")),
                env.getOrDefault("PGUSER", "postgres"),
                env.getOrDefault("PGPASSWORD", ""));
    }

    @Override
    public String product() {
        return "PostgreSQL";
    }

    @Override
    public String url(String database) {
        return "jdbc:postgresql://%s:%d/%s".formatted(this.host, this.port, database);
    }

    @Override
    public void createDatabase(String database) throws SQLException {
        execute("CREATE DATABASE " + database);
    }

    @Override
    public void dropDatabase(String database) throws SQLException {
        execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
    }

    @Override
    public List<String> schemaScripts() {
        return List.of(
                "dev/exactlyonce/idempotency/schema-postgresql.sql",
                "org/springframework/integration/jdbc/schema-postgresql.sql");
    }

    @Override
    public String effectTable() {
        return "CREATE TABLE effect (id uuid PRIMARY KEY, amount numeric(12, 3) NOT NULL)";
    }

    @Override
    public List<String> emptyTables() {
        return List.of("TRUNCATE effect, processed_event, int_metadata_store, outbox_event, outbox_publisher");
    }

    @Override
    public List<String> settle() {
        return List.of("CHECKPOINT");
    }

    // The guard's claim, as it runs it (its look for a claim of an earlier version included).
    @Override
    public String claim() {
        return """
                INSERT INTO processed_event (event_id, scope, event_name) SELECT ?, '', ?
                WHERE NOT EXISTS (SELECT FROM processed_event WHERE event_id = ? AND scope = '' AND event_name = '')
                ON CONFLICT DO NOTHING""";
    }

    @Override
    public void claim(PreparedStatement claim, UUID eventId, String eventName) throws SQLException {
        claim.setObject(1, eventId);
        claim.setString(2, eventName);
        claim.setObject(3, eventId);
        claim.executeUpdate();
    }

    @Override
    public Map<String, String> unsupported() {
        return Map.of();
    }

    void execute(String sql) throws SQLException {
        try (Connection connection = DriverManager.getConnection(url("postgres"), this.user, this.password);
                Statement statement = connection.createStatement()) {
            statement.execute(sql);
        }
    }

    @Override
    public HikariDataSource dataSource(String database, int poolSize) {
        HikariDataSource dataSource = new HikariDataSource();
        dataSource.setJdbcUrl(url(database));
        dataSource.setUsername(this.user);
        dataSource.setPassword(this.password);
        dataSource.setMaximumPoolSize(poolSize);
        return dataSource;
    }

    @Override
    public String toString() {
        return "%s@%s:%d".formatted(this.user, this.host, this.port);
    }
}
