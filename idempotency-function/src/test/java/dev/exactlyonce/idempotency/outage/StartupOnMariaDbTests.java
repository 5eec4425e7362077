package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.guard.KeyScopeAcrossDeploymentsTests;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import org.junit.jupiter.api.Test;

/**
 * What runs on PostgreSQL only: partitioned retention, on MariaDB, is refused at start-up, saying so.
 */
class StartupOnMariaDbTests {

    private static final String RECORD = "spring.cloud.function.definition=idempotencyGuard|recordThing";

    private final TestDatabase database = TestMariaDb.newDatabase("startup");

    @Test
    void partitionedRetentionIsRefusedSayingItRunsOnPostgreSqlOnly() {
        Throwable failure = Deployment.of(KeyScopeAcrossDeploymentsTests.Service.class)
                .on(this.database)
                .with(RECORD, "idempotency.partitioning.enabled=true")
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("runs on PostgreSQL only, and the service's database is MariaDB")
                .hasMessageContaining("Set idempotency.partitioning.enabled=false");
    }
}
