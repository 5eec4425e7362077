package dev.exactlyonce.idempotency.test;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.util.ClassUtils;

/**
 * The PostgreSQL server of a test run, and new databases on it.
 *
 * <p>The server is, in this order: the one the environment names ({@code PGHOST}, {@code PGPORT}, {@code PGUSER},
 * {@code PGPASSWORD}); a Testcontainers container when a Docker engine is available; {@code 127.0.0.1:5432} as
 * {@code postgres} with no password. Each {@link #newDatabase(String)} is a fresh database named after the run, so
 * runs sharing one server never see each other's data; the run's databases are dropped when the JVM exits, and
 * databases left over from runs older than a day are dropped at the first call.
 */
public final class TestPostgres {

    private static final Logger logger = LoggerFactory.getLogger(TestPostgres.class);

    private static final String PREFIX = "it_";

    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMddHHmm", Locale.ROOT);

    private static final Duration STALE_AFTER = Duration.ofDays(1);

    private static @Nullable TestPostgres instance;

    private final String host;

    private final int port;

    private final String username;

    private final String password;

    private final String runId;

    private final List<String> databases = new ArrayList<>();

    private TestPostgres(String host, int port, String username, String password) {
        this.host = host;
        this.port = port;
        this.username = username;
        this.password = password;
        this.runId = LocalDateTime.now().format(STAMP) + "_"
                + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000));
    }

    /** The server of this test run, found (or started) at the first call. */
    public static synchronized TestPostgres server() {
        if (instance == null) {
            instance = locate();
            instance.dropStaleDatabases();
            Runtime.getRuntime().addShutdownHook(new Thread(instance::dropDatabases, "drop-test-databases"));
        }
        return instance;
    }

    /** A new, empty database whose name starts with {@code it_<purpose>_}, dropped when the JVM exits. */
    public static TestDatabase newDatabase(String purpose) {
        return server().createDatabase(purpose);
    }

    public String host() {
        return this.host;
    }

    public int port() {
        return this.port;
    }

    public String username() {
        return this.username;
    }

    public String password() {
        return this.password;
    }

    /** The JDBC URL of a database of this server. */
    public String jdbcUrl(String database) {
        return "jdbc:postgresql://%s:%d/%s".formatted(this.host, this.port, database);
    }

    /** Runs statements on the server's {@code postgres} database, as the server's user. */
    public void execute(String... statements) {
        try (Connection connection = connect("postgres");
                Statement statement = connection.createStatement()) {
            for (String sql : statements) {
                statement.execute(sql);
            }
        } catch (SQLException ex) {
            throw new IllegalStateException("Could not run " + String.join("; ", statements), ex);
        }
    }

    synchronized TestDatabase createDatabase(String purpose) {
        String label = purpose.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
        String name = PREFIX + label.substring(0, Math.min(20, label.length())) + "_" + this.runId + "_"
                + this.databases.size();
        execute("CREATE DATABASE \"" + name + "\"");
        this.databases.add(name);
        logger.info("Created test database {} on {}:{}", name, this.host, this.port);
        return new TestDatabase(name, jdbcUrl(name), this.username, this.password);
    }

    private Connection connect(String database) throws SQLException {
        return DriverManager.getConnection(jdbcUrl(database), this.username, this.password);
    }

    private synchronized void dropDatabases() {
        for (String name : this.databases) {
            try {
                execute("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)");
            } catch (IllegalStateException ex) {
                logger.warn("Could not drop test database {}: {}", name, ex.getMessage());
            }
        }
    }

    private void dropStaleDatabases() {
        String oldest = LocalDateTime.now().minus(STALE_AFTER).format(STAMP);
        List<String> stale = new ArrayList<>();
        try (Connection connection = connect("postgres");
                Statement statement = connection.createStatement();
                ResultSet names = statement.executeQuery(
                        "SELECT datname FROM pg_database WHERE datname LIKE 'it\\_%' ORDER BY datname")) {
            while (names.next()) {
                String name = names.getString(1);
                String[] parts = name.split("_");
                if (parts.length > 2 && parts[2].matches("\\d{12}") && parts[2].compareTo(oldest) < 0) {
                    stale.add(name);
                }
            }
        } catch (SQLException ex) {
            throw new IllegalStateException("Could not list databases on " + this.host + ":" + this.port, ex);
        }
        stale.forEach(name -> execute("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)"));
    }

    private static TestPostgres locate() {
        Map<String, String> env = System.getenv();
        if (env.containsKey("PGHOST")) {
            return checked(
                    new TestPostgres(
                            env.get("PGHOST"),
                            Integer.parseInt(env.getOrDefault("PGPORT", "5432")),
                            env.getOrDefault("PGUSER", "postgres"),
                            env.getOrDefault("PGPASSWORD", "")),
                    "PGHOST");
        }
        if (DockerEngine.isAvailable()) {
            return Containers.postgres();
        }
        return checked(new TestPostgres("127.0.0.1", 5432, "postgres", ""), "default");
    }

    private static TestPostgres checked(TestPostgres server, String source) {
        try (Connection connection = server.connect("postgres")) {
            logger.info(
                    "Tests use PostgreSQL at {}:{} ({}), as {}",
                    server.host,
                    server.port,
                    source.equals("default") ? "local default" : "from PGHOST",
                    server.username);
            return server;
        } catch (SQLException ex) {
            throw new IllegalStateException(
                    ("No PostgreSQL for the tests: %s:%d does not accept connections as %s (%s). Either start a Docker"
                                    + " engine, so that Testcontainers starts one, or run PostgreSQL and name it with"
                                    + " PGHOST, PGPORT, PGUSER and PGPASSWORD (default 127.0.0.1, 5432, postgres, no"
                                    + " password).")
                            .formatted(server.host, server.port, server.username, ex.getMessage()),
                    ex);
        }
    }

    /** Testcontainers, loaded only when a Docker engine is there. */
    private static final class Containers {

        static TestPostgres postgres() {
            org.testcontainers.postgresql.PostgreSQLContainer container =
                    new org.testcontainers.postgresql.PostgreSQLContainer("postgres:16-alpine");
            // Logical decoding, for tests that read the outbox through change data capture (Debezium).
            container.withCommand("postgres", "-c", "fsync=off", "-c", "wal_level=logical");
            container.start();
            logger.info("Tests use PostgreSQL in container {}", container.getContainerId());
            return new TestPostgres(
                    container.getHost(),
                    container.getFirstMappedPort(),
                    container.getUsername(),
                    container.getPassword());
        }
    }

    /** Whether Testcontainers is on the class path and finds a Docker engine. */
    static final class DockerEngine {

        private static @Nullable Boolean available;

        static synchronized boolean isAvailable() {
            if (available == null) {
                available = ClassUtils.isPresent("org.testcontainers.DockerClientFactory", null)
                        && org.testcontainers.DockerClientFactory.instance().isDockerAvailable();
                logger.info(
                        available
                                ? "A Docker engine is available: tests start their servers with Testcontainers"
                                : "No Docker engine: tests use the servers named by the environment, or localhost");
            }
            return available;
        }
    }
}
