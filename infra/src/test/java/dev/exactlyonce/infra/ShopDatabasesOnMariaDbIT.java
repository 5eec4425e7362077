package dev.exactlyonce.infra;

import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.infra.shop.ShopDatabases;
import java.sql.SQLException;
import java.util.List;

/** {@link ShopDatabasesIT} on a real MariaDB: users and grants in place of roles and default privileges. */
class ShopDatabasesOnMariaDbIT extends ShopDatabasesIT {

    @Override
    ShopDatabases.Server server() {
        TestMariaDb mariaDb = TestMariaDb.server();
        return new ShopDatabases.Server(
                "mariadb", mariaDb.host(), mariaDb.port(), mariaDb.username(), mariaDb.password());
    }

    @Override
    String createTable() {
        return "CREATE TABLE IF NOT EXISTS reservation (id BIGINT AUTO_INCREMENT PRIMARY KEY, quantity INT NOT NULL)";
    }

    /**
     * 1142 (a command denied to the user on a table), 1044 (access denied to the database), 1227 (a privilege the user
     * does not have): by their codes, since MariaDB's SQLSTATE 42000 is also a syntax error's.
     */
    @Override
    boolean refused(SQLException ex) {
        return List.of(1142, 1044, 1227).contains(ex.getErrorCode());
    }

    @Override
    String accessDenied() {
        return "Access denied for user";
    }
}
