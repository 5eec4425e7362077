package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.infra.shop.ShopDatabases;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The shop's databases on a real PostgreSQL: a service migrates as its database's owner and works as a role that may
 * read and write the tables, and nothing more, so that a compromised service cannot drop or alter its tables, nor
 * open another service's database. {@code ShopDatabasesOnMariaDbIT} runs the same on MariaDB.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ShopDatabasesIT {

    private ShopDatabases databases;

    /** The database server the shop's databases are made on. */
    ShopDatabases.Server server() {
        TestPostgres postgres = TestPostgres.server();
        return new ShopDatabases.Server(
                "postgresql", postgres.host(), postgres.port(), postgres.username(), postgres.password());
    }

    /** What the service's migrations do, as the owner: a table with a generated key. */
    String createTable() {
        return "CREATE TABLE IF NOT EXISTS reservation (id bigserial PRIMARY KEY, quantity int NOT NULL)";
    }

    /** Whether the statement was refused for want of a privilege (or because the role cannot see the table). */
    boolean refused(SQLException ex) {
        return List.of("42501", "42P01").contains(ex.getSQLState());
    }

    /** What the server says when a role opens a database it may not. */
    String accessDenied() {
        return "permission denied for database";
    }

    @BeforeAll
    void recreate() throws Exception {
        this.databases = ShopDatabases.on(
                server(),
                "_db" + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000)));
        this.databases.recreate();
    }

    @BeforeEach
    void migrate() throws Exception {
        try (Connection owner = this.databases.connectAs("stock", "stock");
                Statement statement = owner.createStatement()) {
            statement.execute(createTable());
        }
    }

    @AfterAll
    void drop() throws Exception {
        this.databases.drop();
    }

    @Test
    void theRoleAServiceWorksAsReadsAndWritesItsTables() throws Exception {
        try (Connection app = this.databases.connect(this.databases.appRole("stock"), "stock");
                Statement statement = app.createStatement()) {
            statement.execute("INSERT INTO reservation (quantity) VALUES (1)");
            statement.execute("UPDATE reservation SET quantity = 2");
            try (var rows = statement.executeQuery("SELECT count(*) FROM reservation")) {
                rows.next();
                assertThat(rows.getInt(1)).isEqualTo(1);
            }
            statement.execute("DELETE FROM reservation");
        }
    }

    @Test
    void theRoleAServiceWorksAsCannotDropAlterOrCreateTables() throws Exception {
        for (String ddl : new String[] {
            "DROP TABLE reservation",
            "ALTER TABLE reservation DROP COLUMN quantity",
            "TRUNCATE reservation",
            "CREATE TABLE stolen (id int)"
        }) {
            try (Connection app = this.databases.connect(this.databases.appRole("stock"), "stock");
                    Statement statement = app.createStatement()) {
                assertThatExceptionOfType(SQLException.class)
                        .as(ddl)
                        .isThrownBy(() -> statement.execute(ddl))
                        .satisfies(ex -> assertThat(refused(ex))
                                .as("%s (%s, %d)", ex.getMessage(), ex.getSQLState(), ex.getErrorCode())
                                .isTrue());
            }
        }
    }

    @Test
    void theRoleAServiceWorksAsCannotOpenAnotherServicesDatabase() {
        assertThatExceptionOfType(SQLException.class)
                .isThrownBy(() -> this.databases
                        .connect(this.databases.appRole("stock"), "billing")
                        .close())
                .withMessageContaining(accessDenied());
    }
}
