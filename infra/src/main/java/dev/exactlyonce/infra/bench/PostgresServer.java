package dev.exactlyonce.infra.bench;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Map;

/**
 * The PostgreSQL server a benchmark runs on, named like the tests' ({@code PGHOST}, {@code PGPORT}, {@code PGUSER},
 * {@code PGPASSWORD}; by default {@code 127.0.0.1:5432} as {@code postgres}). Each benchmark works in a database of its
 * own, dropped at the end.
 */
public record PostgresServer(String host, int port, String user, String password) {

    public static PostgresServer fromEnvironment(Map<String, String> env) {
        return new PostgresServer(
                env.getOrDefault("PGHOST", "127.0.0.1"),
                Integer.parseInt(env.getOrDefault("PGPORT", "5432")),
                env.getOrDefault("PGUSER", "postgres"),
                env.getOrDefault("PGPASSWORD", ""));
    }

    String url(String database) {
        return "jdbc:postgresql://%s:%d/%s".formatted(this.host, this.port, database);
    }

    void execute(String sql) throws SQLException {
        try (Connection connection = DriverManager.getConnection(url("postgres"), this.user, this.password);
                Statement statement = connection.createStatement()) {
            statement.execute(sql);
        }
    }

    HikariDataSource dataSource(String database, int poolSize) {
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
