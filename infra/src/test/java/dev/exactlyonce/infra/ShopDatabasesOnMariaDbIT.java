package dev.exactlyonce.infra;

import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.infra.shop.ShopDatabases;
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

    /** 1142 (command denied to user) and 1044 (access denied to database), both 42000. */
    @Override
    List<String> refused() {
        return List.of("42000");
    }
}
