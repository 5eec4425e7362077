package dev.exactlyonce.infra;

import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.infra.shop.ShopDatabases;
import org.junit.jupiter.api.condition.EnabledIf;

/**
 * {@link ThreeSourcesOfDuplicatesIT} on a real MariaDB: the same services, from the same jars, with nothing but the
 * JDBC URL changed (each carries MariaDB's driver and its tables in MariaDB's SQL).
 */
@EnabledIf(value = "dev.exactlyonce.infra.ShopOfTheRun#mariadb", disabledReason = ShopOfTheRun.SKIPPED)
class ThreeSourcesOfDuplicatesOnMariaDbIT extends ThreeSourcesOfDuplicatesIT {

    @Override
    ShopDatabases.Server database() {
        TestMariaDb mariaDb = TestMariaDb.server();
        return new ShopDatabases.Server(
                "mariadb", mariaDb.host(), mariaDb.port(), mariaDb.username(), mariaDb.password());
    }

    @Override
    String accessDenied() {
        return "Access denied for user";
    }
}
