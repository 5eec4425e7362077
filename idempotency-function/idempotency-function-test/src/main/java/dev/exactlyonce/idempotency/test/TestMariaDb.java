package dev.exactlyonce.idempotency.test;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
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

/**
 * The MariaDB server of a test run, and new databases on it: what {@link TestPostgres} is for PostgreSQL.
 *
 * <p>The server is, in this order: the one the environment names ({@code MARIADB_HOST}, {@code MARIADB_PORT},
 * {@code MARIADB_USER}, {@code MARIADB_PASSWORD}); a Testcontainers container ({@code mariadb:10.11}) when a Docker
 * engine is available; {@code 127.0.0.1:3306} as {@code root} with no password. Each {@link #newDatabase(String)} is a
 * fresh database named after the run, dropped when the JVM exits; databases left over from runs older than a day are
 * dropped at the first call. Needs MariaDB's driver ({@code org.mariadb.jdbc:mariadb-java-client}) on the class path.
 */
public final class TestMariaDb {

    private static final Logger logger = LoggerFactory.getLogger(TestMariaDb.class);

    private static final String PREFIX = "it_";

    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMddHHmm", Locale.ROOT);

    private static @Nullable TestMariaDb instance;

    private final String host;

    private final int port;

    private final String username;

    private final String password;

    private final String runId;

    private final List<String> databases = new ArrayList<>();

    private TestMariaDb(String host, int port, String username, String password) {
        this.host = host;
        this.port = port;
        this.username = username;
        this.password = password;
        this.runId = LocalDateTime.now().format(STAMP) + "_"
                + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000));
    }

    /** The server of this test run, found (or started) at the first call. */
    public static synchronized TestMariaDb server() {
        if (instance == null) {
            instance = locate();
            instance.dropStaleDatabases();
            Runtime.getRuntime().addShutdownHook(new Thread(instance::dropDatabases, "drop-test-mariadb-databases"));
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

    /** A user that may create databases and users. */
    public String username() {
        return this.username;
    }

    public String password() {
        return this.password;
    }

    /** The JDBC URL of a database of this server. */
    public String jdbcUrl(String database) {
        return "jdbc:mariadb://%s:%d/%s".formatted(this.host, this.port, database);
    }

    /** Runs statements on the server, as the server's user, outside any database. */
    public void execute(String... statements) {
        try (Connection connection = connect("");
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
        execute("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
        this.databases.add(name);
        logger.info("Created test database {} on MariaDB {}:{}", name, this.host, this.port);
        return new TestDatabase(name, jdbcUrl(name), this.username, this.password);
    }

    private Connection connect(String database) throws SQLException {
        return DriverManager.getConnection(jdbcUrl(database), this.username, this.password);
    }

    private synchronized void dropDatabases() {
        for (String name : this.databases) {
            try {
                execute("DROP DATABASE IF EXISTS `" + name + "`");
            } catch (IllegalStateException ex) {
                logger.warn("Could not drop test database {}: {}", name, ex.getMessage());
            }
        }
    }

    private void dropStaleDatabases() {
        String oldest = LocalDateTime.now().minusDays(1).format(STAMP);
        List<String> stale = new ArrayList<>();
        try (Connection connection = connect("");
                Statement statement = connection.createStatement();
                ResultSet names = statement.executeQuery("SHOW DATABASES LIKE 'it\\_%'")) {
            while (names.next()) {
                String[] parts = names.getString(1).split("_");
                if (parts.length > 2 && parts[2].matches("\\d{12}") && parts[2].compareTo(oldest) < 0) {
                    stale.add(names.getString(1));
                }
            }
        } catch (SQLException ex) {
            throw new IllegalStateException("Could not list databases on " + this.host + ":" + this.port, ex);
        }
        stale.forEach(name -> execute("DROP DATABASE IF EXISTS `" + name + "`"));
    }

    private static TestMariaDb locate() {
        Map<String, String> env = System.getenv();
        if (env.containsKey("MARIADB_HOST")) {
            return checked(
                    new TestMariaDb(
                            env.get("MARIADB_HOST"),
                            Integer.parseInt(env.getOrDefault("MARIADB_PORT", "3306")),
                            env.getOrDefault("MARIADB_USER", "root"),
                            env.getOrDefault("MARIADB_PASSWORD", "")),
                    "from MARIADB_HOST");
        }
        if (TestPostgres.DockerEngine.isAvailable()) {
            return Containers.mariaDb();
        }
        return checked(new TestMariaDb("127.0.0.1", 3306, "root", ""), "local default");
    }

    private static TestMariaDb checked(TestMariaDb server, String source) {
        try (Connection connection = server.connect("")) {
            logger.info("Tests use MariaDB at {}:{} ({}), as {}", server.host, server.port, source, server.username);
            return server;
        } catch (SQLException ex) {
            throw new IllegalStateException(
                    ("No MariaDB for the tests: %s:%d does not accept connections as %s (%s). Either start a Docker"
                                    + " engine, so that Testcontainers starts one, or run MariaDB 10.7 or later and"
                                    + " name it with MARIADB_HOST, MARIADB_PORT, MARIADB_USER and MARIADB_PASSWORD"
                                    + " (default 127.0.0.1, 3306, root, no password).")
                            .formatted(server.host, server.port, server.username, ex.getMessage()),
                    ex);
        }
    }

    /** Testcontainers, loaded only when a Docker engine is there. */
    private static final class Containers {

        static TestMariaDb mariaDb() {
            org.testcontainers.mariadb.MariaDBContainer container =
                    new org.testcontainers.mariadb.MariaDBContainer("mariadb:10.11");
            container.withUsername("root").withPassword("test");
            container.start();
            logger.info("Tests use MariaDB in container {}", container.getContainerId());
            return new TestMariaDb(container.getHost(), container.getFirstMappedPort(), "root", "test");
        }
    }
}
