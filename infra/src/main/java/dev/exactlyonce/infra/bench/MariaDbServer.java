package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The MariaDB server a benchmark runs on, named like the tests' ({@code MARIADB_HOST}, {@code MARIADB_PORT},
 * {@code MARIADB_USER}, {@code MARIADB_PASSWORD}; by default {@code 127.0.0.1:3306} as {@code root}).
 */
public record MariaDbServer(String host, int port, String user, String password) implements BenchDatabase {

    public static MariaDbServer fromEnvironment(Map<String, String> env) {
        return new MariaDbServer(
                env.getOrDefault("MARIADB_HOST", "127.0.0.1"),
                Integer.parseInt(env.getOrDefault("MARIADB_PORT", "3306")),
                env.getOrDefault("MARIADB_USER", "root"),
                env.getOrDefault("MARIADB_PASSWORD", ""));
    }

    @Override
    public String product() {
        return "MariaDB";
    }

    @Override
    public String url(String database) {
        return "jdbc:mariadb://%s:%d/%s".formatted(this.host, this.port, database);
    }

    @Override
    public void createDatabase(String database) throws SQLException {
        execute("CREATE DATABASE " + database + " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
    }

    @Override
    public void dropDatabase(String database) throws SQLException {
        execute("DROP DATABASE IF EXISTS " + database);
    }

    private void execute(String sql) throws SQLException {
        try (Connection connection = DriverManager.getConnection(url(""), this.user, this.password);
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
    public List<String> schemaScripts() {
        return List.of("dev/exactlyonce/idempotency/schema-mariadb.sql");
    }

    @Override
    public String effectTable() {
        return "CREATE TABLE effect (id UUID PRIMARY KEY, amount DECIMAL(12, 3) NOT NULL)";
    }

    @Override
    public List<String> emptyTables() {
        return List.of(
                "TRUNCATE effect",
                "TRUNCATE processed_event",
                "DELETE FROM outbox_event",
                "DELETE FROM outbox_publisher");
    }

    // The guard's claim on MariaDB, as it runs it: the row's token read back.
    @Override
    public String claim() {
        return """
                INSERT INTO processed_event (event_id, scope, event_name, claim_token) VALUES (?, '', ?, ?)
                ON DUPLICATE KEY UPDATE event_id = event_id RETURNING event_id, event_name, claim_token""";
    }

    @Override
    public void claim(PreparedStatement claim, UUID eventId, String eventName) throws SQLException {
        claim.setString(1, eventId.toString());
        claim.setString(2, eventName);
        claim.setLong(3, ThreadLocalRandom.current().nextLong() | 1);
        try (ResultSet row = claim.executeQuery()) {
            row.next();
        }
    }

    @Override
    public Map<String, String> unsupported() {
        return Map.of("peer", "the peer's metadata store is set up on PostgreSQL only");
    }

    @Override
    public String toString() {
        return "%s@%s:%d".formatted(this.user, this.host, this.port);
    }
}
