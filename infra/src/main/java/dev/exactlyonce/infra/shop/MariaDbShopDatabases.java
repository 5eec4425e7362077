package dev.exactlyonce.infra.shop;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The shop's databases on MariaDB: a user sees and reaches only the databases it holds privileges on; the owner holds
 * them all on its database ({@code db.*}, so on every table it creates later too), the {@code _app} user
 * {@code SELECT, INSERT, UPDATE, DELETE} there, nothing else. Users are {@code 'name'@'%'}: the services connect over
 * TCP, through the scenario's proxy.
 */
final class MariaDbShopDatabases extends ShopDatabases {

    /**
     * A row trigger that fails the first row marked published, once: a sequence's values are not rolled back with the
     * statement, so the next run's marks go through. The statement fails whole, the run's transaction with it.
     */
    private static final String[] REFUSE_FIRST_MARK = {"CREATE SEQUENCE relay_marks NOCACHE", """
        CREATE TRIGGER refuse_first_mark BEFORE UPDATE ON outbox_event FOR EACH ROW
        BEGIN
            IF OLD.published_at IS NULL AND NEW.published_at IS NOT NULL AND NEXTVAL(relay_marks) = 1 THEN
                SIGNAL SQLSTATE '45000'
                    SET MESSAGE_TEXT = 'the commit of the relay''s run fails (injected by the scenario)';
            END IF;
        END"""};

    MariaDbShopDatabases(Server server, String suffix) {
        super(server, suffix);
    }

    @Override
    public void recreate() throws SQLException {
        drop();
        try (Connection connection = connectAsAdministrator("");
                Statement statement = connection.createStatement()) {
            for (String name : NAMES) {
                String owner = name(name);
                statement.execute(
                        "CREATE DATABASE %s CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin".formatted(owner));
                statement.execute("CREATE USER '%1$s'@'%%' IDENTIFIED BY '%1$s'".formatted(owner));
                statement.execute("GRANT ALL PRIVILEGES ON %s.* TO '%s'@'%%'".formatted(literal(owner), owner));
                if (!name.equals("orders")) {
                    String app = appRole(name);
                    statement.execute("CREATE USER '%1$s'@'%%' IDENTIFIED BY '%1$s'".formatted(app));
                    statement.execute(
                            "GRANT SELECT, INSERT, UPDATE, DELETE ON %s.* TO '%s'@'%%'".formatted(literal(owner), app));
                }
            }
        }
    }

    /**
     * A database name as a grant's pattern matches it alone: {@code _} in a grant's database name matches any character
     * unless escaped ({@code stock_it1} would grant {@code stockXit1} too).
     */
    private static String literal(String database) {
        return "`" + database.replace("_", "\\_") + "`";
    }

    @Override
    public void drop() throws SQLException {
        try (Connection connection = connectAsAdministrator("");
                Statement statement = connection.createStatement()) {
            for (String name : NAMES) {
                statement.execute("DROP DATABASE IF EXISTS %s".formatted(name(name)));
                statement.execute("DROP USER IF EXISTS '%s'@'%%'".formatted(name(name)));
                statement.execute("DROP USER IF EXISTS '%s'@'%%'".formatted(appRole(name)));
            }
        }
    }

    @Override
    public String url(String database) {
        return "jdbc:mariadb://%s:%d/%s".formatted(this.server.host(), this.server.port(), database);
    }

    @Override
    String orderServiceSchema() {
        return "classpath:dev/exactlyonce/idempotency/schema-mariadb.sql,"
                + "classpath:dev/exactlyonce/infra/shop/orders-mariadb.sql";
    }

    /** As the administrator: the trigger runs with its definer's rights, whoever updates the table. */
    @Override
    void refuseFirstOutboxMark(String database) throws SQLException {
        try (Connection administrator = connectAsAdministrator(name(database));
                Statement statement = administrator.createStatement()) {
            for (String sql : REFUSE_FIRST_MARK) {
                statement.execute(sql);
            }
        }
    }

    @Override
    void acceptOutboxMarks(String database) throws SQLException {
        try (Connection administrator = connectAsAdministrator(name(database));
                Statement statement = administrator.createStatement()) {
            statement.execute("DROP TRIGGER refuse_first_mark");
        }
    }
}
