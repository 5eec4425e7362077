package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * What runs on PostgreSQL only, for now, on MariaDB: partitioned retention is refused at start-up, saying so, as is a
 * guarded function that returns events (each message would fail); the outbox relay stays off, and an event emitted to
 * the outbox is refused, saying so, rather than failing on a missing table.
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

    @Test
    void aGuardedFunctionThatReturnsEventsIsRefusedRatherThanFailEveryMessage() {
        Throwable failure = Deployment.of(GuardStartupTests.Service.class)
                .on(this.database)
                .with("spring.cloud.function.definition=idempotencyGuard|describeThing")
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("The outbox runs on PostgreSQL only")
                .hasMessageContaining("idempotencyGuard|describeThing returns events");
    }

    @Test
    void theOutboxRelayIsOffAndAnEventEmittedIsRefusedSayingWhy() {
        try (ConfigurableApplicationContext service = Deployment.of(KeyScopeAcrossDeploymentsTests.Service.class)
                .on(this.database)
                .with(RECORD)
                .start()) {
            assertThat(service.getBean(OutboxRelay.class).isRunning()).isFalse();
            Outbox outbox = service.getBean(Outbox.class);
            TransactionTemplate transaction = new TransactionTemplate(service.getBean(JdbcTransactionManager.class));

            assertThatThrownBy(() -> transaction.executeWithoutResult(
                            status -> outbox.emit("test.thing.happened.v1", "thing-1", Map.of())))
                    .isInstanceOf(IdempotencyException.class)
                    .hasMessageContaining("The outbox runs on PostgreSQL only");
        }
    }
}
