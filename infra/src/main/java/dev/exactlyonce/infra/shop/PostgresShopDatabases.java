package dev.exactlyonce.infra.shop;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The shop's databases on PostgreSQL: {@code CONNECT} revoked from {@code PUBLIC} on each, so that only its owner and
 * its service's {@code _app} role reach it; the {@code _app} role gets its privileges on the owner's tables by default
 * privileges, and may not create in the schema.
 */
final class PostgresShopDatabases extends ShopDatabases {

    /** A login role whose password is its name, unless it exists. */
    private static final String CREATE_ROLE = """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%1$s') THEN
                    CREATE ROLE %1$s LOGIN PASSWORD '%1$s';
                END IF;
            END $$""";

    /** A statement trigger that fails the first update of the outbox, once (a sequence is not rolled back). */
    private static final String[] REFUSE_FIRST_MARK = {
        "CREATE SEQUENCE relay_marks",
        """
        CREATE FUNCTION refuse_first_mark() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('relay_marks') = 1 THEN
                RAISE EXCEPTION 'the commit of the relay''s run fails (injected by the scenario)';
            END IF;
            RETURN NULL;
        END $$""",
        "CREATE TRIGGER refuse_first_mark AFTER UPDATE ON outbox_event FOR EACH STATEMENT"
                + " EXECUTE FUNCTION refuse_first_mark()"
    };

    PostgresShopDatabases(Server server, String suffix) {
        super(server, suffix);
    }

    @Override
    public void recreate() throws SQLException {
        try (Connection connection = connectAsAdministrator("postgres");
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
        try (Connection database = connectAsAdministrator(owner);
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

    @Override
    public void drop() throws SQLException {
        try (Connection connection = connectAsAdministrator("postgres");
                Statement statement = connection.createStatement()) {
            for (String name : NAMES) {
                statement.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)".formatted(name(name)));
                statement.execute("DROP ROLE IF EXISTS %s".formatted(name(name)));
                statement.execute("DROP ROLE IF EXISTS %s".formatted(appRole(name)));
            }
        }
    }

    @Override
    public String url(String database) {
        return "jdbc:postgresql://%s:%d/%s".formatted(this.server.host(), this.server.port(), database);
    }

    @Override
    String orderServiceSchema() {
        return "classpath:dev/exactlyonce/idempotency/schema-postgresql.sql,"
                + "classpath:dev/exactlyonce/infra/shop/orders-postgresql.sql";
    }

    /** As the database's owner: the trigger's function then uses the sequence as the role that updates the table. */
    @Override
    void refuseFirstOutboxMark(String database) throws SQLException {
        try (Connection owner = connectAs(database, database);
                Statement statement = owner.createStatement()) {
            for (String sql : REFUSE_FIRST_MARK) {
                statement.execute(sql);
            }
        }
    }

    @Override
    void acceptOutboxMarks(String database) throws SQLException {
        try (Connection owner = connectAs(database, database);
                Statement statement = owner.createStatement()) {
            statement.execute("DROP TRIGGER refuse_first_mark ON outbox_event");
        }
    }
}
