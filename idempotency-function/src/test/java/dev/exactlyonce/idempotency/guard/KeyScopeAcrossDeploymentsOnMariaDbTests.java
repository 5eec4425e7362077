package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;

/**
 * The scope registry of {@link KeyScopeAcrossDeploymentsTests} on MariaDB: its session lock, its registration and the
 * copy of a former scope's claims in MariaDB's SQL.
 */
class KeyScopeAcrossDeploymentsOnMariaDbTests extends KeyScopeAcrossDeploymentsTests {

    @Override
    TestDatabase newDatabase(String purpose) {
        return TestMariaDb.newDatabase(purpose);
    }
}
