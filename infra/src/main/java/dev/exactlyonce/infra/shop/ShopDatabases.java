package dev.exactlyonce.infra.shop;

import dev.exactlyonce.infra.bench.MariaDbServer;
import dev.exactlyonce.infra.bench.PostgresServer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;

/**
 * The shop's databases on one server (PostgreSQL or MariaDB): one per service (and one for the order service), each
 * owned by a role of its own that no other role can reach, so a service cannot read another's tables. A service
 * migrates as the owner ({@code spring.flyway.user}) and works as a second role, {@code <service>_app}, that may read
 * and write the tables the owner creates and nothing more (no {@code CREATE}, no {@code ALTER}, no {@code DROP}): a
 * compromised service cannot drop or alter its tables. Made from scratch on every {@link #recreate()}: earlier data is
 * dropped. Passwords are the roles' names: the shop is a demonstration and a test, never a deployment.
 */
public abstract sealed class ShopDatabases permits PostgresShopDatabases, MariaDbShopDatabases {

    /** The services' databases and roles, and the order service's. */
    public static final List<String> NAMES = List.of("stock", "shipping", "billing", "orders");

    /**
     * A database server for the shop.
     *
     * @param product {@code postgresql} or {@code mariadb}
     * @param host the server
     * @param port its port
     * @param adminUser a user that may create users and databases
     * @param adminPassword its password
     */
    public record Server(String product, String host, int port, String adminUser, String adminPassword) {

        /** The products the shop runs on, as {@code --database} names them. */
        public static final List<String> PRODUCTS = List.of("postgresql", "mariadb");

        public Server {
            if (!PRODUCTS.contains(product)) {
                throw new IllegalArgumentException(
                        "Unknown database '%s'; the shop runs on %s".formatted(product, String.join(" or ", PRODUCTS)));
            }
        }

        /**
         * The server the environment names: {@code PGHOST}, {@code PGPORT}, {@code PGUSER}, {@code PGPASSWORD} for
         * PostgreSQL (default {@code 127.0.0.1:5432}, {@code postgres}), {@code MARIADB_HOST}, {@code MARIADB_PORT},
         * {@code MARIADB_USER}, {@code MARIADB_PASSWORD} for MariaDB (default {@code 127.0.0.1:3306}, {@code root}).
         */
        public static Server fromEnvironment(String product, Map<String, String> env) {
            if (product.equals("mariadb")) {
                MariaDbServer server = MariaDbServer.fromEnvironment(env);
                return new Server(product, server.host(), server.port(), server.user(), server.password());
            }
            PostgresServer server = PostgresServer.fromEnvironment(env);
            return new Server(product, server.host(), server.port(), server.user(), server.password());
        }

        /** Who the shop's databases are made as, for a message. */
        public String administrator() {
            return this.product.equals("mariadb")
                    ? "a user that may create users and databases, such as root"
                    : "a superuser such as postgres";
        }

        /** The variables that name it, for a message. */
        public String environment() {
            return this.product.equals("mariadb")
                    ? "MARIADB_HOST, MARIADB_PORT, MARIADB_USER, MARIADB_PASSWORD"
                    : "PGHOST, PGPORT, PGUSER, PGPASSWORD";
        }

        /** Its service in {@code infra/compose.yaml}. */
        public String composeService() {
            return this.product.equals("mariadb") ? "mariadb" : "postgres";
        }

        /** The same server as {@code infra/compose.yaml}'s administrator, unless the environment names another. */
        public Server asComposeAdministrator(Map<String, String> env) {
            return this.product.equals("mariadb")
                    ? as(env.getOrDefault("MARIADB_USER", "root"), env.getOrDefault("MARIADB_PASSWORD", "mariadb"))
                    : as(this.adminUser, env.getOrDefault("PGPASSWORD", "postgres"));
        }

        /** The same server as another administrator. */
        public Server as(String user, String password) {
            return new Server(this.product, this.host, this.port, user, password);
        }

        /** Its name for people: PostgreSQL or MariaDB. */
        public String displayName() {
            return this.product.equals("mariadb") ? "MariaDB" : "PostgreSQL";
        }
    }

    final Server server;

    private final String suffix;

    ShopDatabases(Server server, String suffix) {
        this.server = server;
        this.suffix = suffix;
    }

    /**
     * The shop's databases on a server.
     *
     * @param suffix appended to every database and role name ({@code ""} for the demo; a run id in tests)
     */
    public static ShopDatabases on(Server server, String suffix) {
        return server.product().equals("mariadb")
                ? new MariaDbShopDatabases(server, suffix)
                : new PostgresShopDatabases(server, suffix);
    }

    public Server server() {
        return this.server;
    }

    /** Drops and creates the databases and their roles. */
    public abstract void recreate() throws SQLException;

    /** Drops the databases and their roles. */
    public abstract void drop() throws SQLException;

    /** The JDBC URL of a database of the server. */
    public abstract String url(String database);

    /**
     * The library's tables and the order service's own, in the server's SQL, for {@code spring.sql.init}: the order
     * service makes them itself, as its owner.
     */
    abstract String orderServiceSchema();

    /**
     * Makes the database refuse, once, the first statement that marks outbox rows published: the relay's run then
     * fails after the broker confirmed its events, which stay unpublished, and its next run publishes them again.
     */
    abstract void refuseFirstOutboxMark(String database) throws SQLException;

    /** Takes away what {@link #refuseFirstOutboxMark} made. */
    abstract void acceptOutboxMarks(String database) throws SQLException;

    /** The database (and role) name of a service, such as {@code stock}. */
    public String name(String service) {
        return service + this.suffix;
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

    /** Connects to a database of the server (or to none: {@code ""}) as its administrator. */
    Connection connectAsAdministrator(String database) throws SQLException {
        return DriverManager.getConnection(url(database), this.server.adminUser(), this.server.adminPassword());
    }
}
