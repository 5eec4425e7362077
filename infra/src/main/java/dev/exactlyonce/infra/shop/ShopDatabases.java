package dev.exactlyonce.infra.shop;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;

/**
 * The shop's databases on a PostgreSQL server: one per service (and one for the order service), each owned by a role
 * of its own that no other role can connect to ({@code CONNECT} revoked from {@code PUBLIC}), so a service cannot
 * read another's tables. A service migrates as the owner ({@code spring.flyway.user}) and works as a second role,
 * {@code <service>_app}, that may read and write the tables the owner creates and nothing more (no {@code CREATE} on
 * the schema, no ownership): a compromised service cannot drop or alter its tables. Made from scratch on every
 * {@link #recreate()}: earlier data is dropped.
 */
public final class ShopDatabases {

    /** The services' databases and roles, and the order service's. */
    public static final List<String> NAMES = List.of("stock", "shipping", "billing", "orders");

    /** A login role whose password is its name, unless it exists. */
    private static final String CREATE_ROLE = """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%1$s') THEN
                    CREATE ROLE %1$s LOGIN PASSWORD '%1$s';
                END IF;
            END $$""";

    private final String adminUrl;

    private final String adminUser;

    private final String adminPassword;

    private final String host;

    private final int port;

    private final String suffix;

    /**
     * @param host the server
     * @param port its port
     * @param adminUser a role that may create roles and databases
     * @param adminPassword its password
     * @param suffix appended to every database and role name ({@code ""} for the demo; a run id in tests)
     */
    public ShopDatabases(String host, int port, String adminUser, String adminPassword, String suffix) {
        this.host = host;
        this.port = port;
        this.adminUrl = url("postgres");
        this.adminUser = adminUser;
        this.adminPassword = adminPassword;
        this.suffix = suffix;
    }

    /** Drops and creates the databases and their roles. */
    public void recreate() throws SQLException {
        try (Connection connection = DriverManager.getConnection(this.adminUrl, this.adminUser, this.adminPassword);
                Statement statement = connection.createStatement()) {
            for (String name : NAMES) {
                String owner = name(name);
                statement.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)".formatted(owner));
                statement.execute(CREATE_ROLE.formatted(owner));
                statement.execute("CREATE DATABASE %1$s OWNER %1$s".formatted(owner));
                statement.execute("REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC".formatted(owner));
                if (!name.equals("orders")) {
                    createAppRole(statement, name);
                }
            }
        }
    }

    /**
     * The role the service works as: it may connect, and read and write (never create, alter or drop) the tables and
     * use the sequences its owner creates in {@code public}, now and later (default privileges).
     */
    private void createAppRole(Statement statement, String service) throws SQLException {
        String owner = name(service);
        String app = appRole(service);
        statement.execute(CREATE_ROLE.formatted(app));
        statement.execute("GRANT CONNECT ON DATABASE %s TO %s".formatted(owner, app));
        try (Connection database = DriverManager.getConnection(url(owner), this.adminUser, this.adminPassword);
                Statement grants = database.createStatement()) {
            // PostgreSQL 15 no longer lets PUBLIC create in public, and gives the schema to the database's owner;
            // earlier versions do both the other way.
            grants.execute("ALTER SCHEMA public OWNER TO " + owner);
            grants.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
            grants.execute("GRANT USAGE ON SCHEMA public TO " + app);
            grants.execute(("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public"
                            + " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s")
                    .formatted(owner, app));
            grants.execute(
                    "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO %s"
                            .formatted(owner, app));
        }
    }

    /** Drops the databases and their roles. */
    public void drop() throws SQLException {
        try (Connection connection = DriverManager.getConnection(this.adminUrl, this.adminUser, this.adminPassword);
                Statement statement = connection.createStatement()) {
            for (String name : NAMES) {
                statement.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)".formatted(name(name)));
                statement.execute("DROP ROLE IF EXISTS %s".formatted(name(name)));
                statement.execute("DROP ROLE IF EXISTS %s".formatted(appRole(name)));
            }
        }
    }

    /** The database (and role) name of a service, such as {@code stock}. */
    public String name(String service) {
        return service + this.suffix;
    }

    /** The JDBC URL of a database of the server. */
    public String url(String database) {
        return "jdbc:postgresql://%s:%d/%s".formatted(this.host, this.port, database);
    }

    /** The role a service works as, such as {@code stock_app}: it reads and writes the tables its owner made. */
    public String appRole(String service) {
        return service + "_app" + this.suffix;
    }

    /** Connects to a database as a role of the shop (password = role name). */
    public Connection connect(String role, String database) throws SQLException {
        return DriverManager.getConnection(url(name(database)), role, role);
    }

    /** Connects to a service's database as that service's role (password = role name). */
    public Connection connectAs(String service, String database) throws SQLException {
        return DriverManager.getConnection(url(name(database)), name(service), name(service));
    }
}
