package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import jakarta.persistence.Entity;
import jakarta.persistence.EntityManager;
import jakarta.persistence.Id;
import jakarta.persistence.PersistenceContext;
import jakarta.persistence.Table;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The outbox beside JPA, on a real PostgreSQL: Hibernate flushes the persistence context as the transaction commits,
 * and the outbox writes its rows, their keys locked, only once it did. A JPA writer whose flush waits for a row lock
 * another writer of the same key holds does not deadlock with it.
 */
@SpringBootTest(
        classes = OutboxWithJpaTests.Service.class,
        properties = {
            "spring.cloud.function.definition=",
            "idempotency.outbox.relay.enabled=false",
            "spring.jpa.hibernate.ddl-auto=none",
            "spring.jpa.open-in-view=false"
        })
@EnableIdempotencyTestKit(testBinder = false)
class OutboxWithJpaTests {

    static final String EVENT = "test.stock.changed.v1";

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {}

    /** A row a JPA writer changes, and flushes only as it commits. */
    @Entity
    @Table(name = "stock_item")
    static class StockItem {

        @Id
        String id;

        int quantity;
    }

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("outboxjpa").registerDataSource(registry);
    }

    @Autowired
    PlatformTransactionManager transactionManager;

    @PersistenceContext
    EntityManager entityManager;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    Outbox outbox;

    @BeforeEach
    void stock() {
        this.jdbc.execute("CREATE TABLE IF NOT EXISTS stock_item (id text PRIMARY KEY, quantity integer NOT NULL)");
        this.jdbc.execute("TRUNCATE stock_item");
        this.jdbc.update("INSERT INTO stock_item (id, quantity) VALUES ('item', 10)");
        this.jdbc.update("DELETE FROM outbox_event");
    }

    @Test
    void aJpaWriterWhoseFlushWaitsForAnotherWriterOfItsKeyDoesNotDeadlockWithIt() throws Exception {
        assertThat(this.transactionManager).isInstanceOf(JpaTransactionManager.class);
        TransactionTemplate transactions = new TransactionTemplate(this.transactionManager);
        CountDownLatch updated = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);
        // The other writer changes the row at once (plain JDBC), emits the key, and commits when told.
        CompletableFuture<UUID> other = CompletableFuture.supplyAsync(() -> transactions.execute(status -> {
            this.jdbc.update("UPDATE stock_item SET quantity = quantity - 1 WHERE id = 'item'");
            UUID id = this.outbox.emit(EVENT, "item", Map.of("by", "jdbc"));
            updated.countDown();
            await(commit);
            return id;
        }));
        assertThat(updated.await(10, TimeUnit.SECONDS)).isTrue();
        // The JPA writer changes the entity (flushed as it commits: its update waits for the other's row lock).
        CompletableFuture<UUID> jpa = CompletableFuture.supplyAsync(() -> transactions.execute(status -> {
            this.entityManager.find(StockItem.class, "item").quantity -= 1;
            return this.outbox.emit(EVENT, "item", Map.of("by", "jpa"));
        }));
        Awaitility.await()
                .atMost(Duration.ofSeconds(10))
                .alias("the JPA writer's flush waits for the other writer's row lock")
                .until(() -> this.jdbc.queryForObject(
                                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                        + " AND wait_event_type = 'Lock'",
                                Integer.class)
                        == 1);
        commit.countDown();

        assertThat(other).as("the writer that held the row").succeedsWithin(Duration.ofSeconds(10));
        assertThat(jpa).as("the JPA writer, none of them a deadlock's victim").succeedsWithin(Duration.ofSeconds(10));
        assertThat(this.jdbc.queryForObject("SELECT quantity FROM stock_item WHERE id = 'item'", Integer.class))
                .as("the JPA writer's value (it read 10 before the other committed), flushed once the other committed")
                .isEqualTo(9);
        assertThat(this.jdbc.queryForList(
                        "SELECT id FROM outbox_event WHERE aggregateid = 'item' ORDER BY position", UUID.class))
                .as("the key's events, in the order their transactions committed")
                .isEqualTo(List.of(other.join(), jpa.join()));
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }
}
