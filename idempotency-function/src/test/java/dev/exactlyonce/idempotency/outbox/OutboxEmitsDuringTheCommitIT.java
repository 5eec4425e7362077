package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.event.TransactionPhase;
import org.springframework.transaction.event.TransactionalEventListener;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * An event emitted from a callback of a transaction's commit, on a real PostgreSQL and RabbitMQ: it is written in the
 * transaction, with its effect, and published, or {@code emit} throws where the caller sees it. Never is the effect
 * committed and the event dropped.
 */
@SpringBootTest(
        classes = OutboxEmitsDuringTheCommitIT.Service.class,
        properties = {"spring.cloud.stream.default-binder=rabbit", "spring.cloud.function.definition="})
@EnableIdempotencyTestKit(testBinder = false)
class OutboxEmitsDuringTheCommitIT {

    static final String EVENT = "test.thing.noticed.v1";

    /** An application event, published in the transaction of its effect; each listener phase acts on its own. */
    record Noticed(String key, TransactionPhase phase) {}

    /** An application event whose listener records it in a transaction of its own, emitting an event of its key. */
    record Audited(String key) {}

    /** What the listeners of each phase did: the ids they emitted, or what emit threw at them. */
    static final List<Object> outcomes = new CopyOnWriteArrayList<>();

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Listeners listeners(Outbox outbox, PlatformTransactionManager transactionManager) {
            return new Listeners(outbox, transactionManager);
        }
    }

    /** Emits as the transactional event listeners of each phase do. */
    static class Listeners {

        private final Outbox outbox;

        private final TransactionTemplate ofItsOwn;

        Listeners(Outbox outbox, PlatformTransactionManager transactionManager) {
            this.outbox = outbox;
            this.ofItsOwn = new TransactionTemplate(transactionManager);
            this.ofItsOwn.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
        }

        /** An audit written as the outer transaction commits, in a transaction of its own, of the outer one's key. */
        @TransactionalEventListener(phase = TransactionPhase.BEFORE_COMMIT)
        void audit(Audited audited) {
            outcomes.add(
                    this.ofItsOwn.execute(status -> this.outbox.emit(EVENT, audited.key(), Map.of("audit", true))));
        }

        @TransactionalEventListener(phase = TransactionPhase.BEFORE_COMMIT)
        void beforeCommit(Noticed noticed) {
            emitIn(TransactionPhase.BEFORE_COMMIT, noticed);
        }

        @TransactionalEventListener
        void afterCommit(Noticed noticed) {
            emitIn(TransactionPhase.AFTER_COMMIT, noticed);
        }

        @TransactionalEventListener(phase = TransactionPhase.AFTER_ROLLBACK)
        void afterRollback(Noticed noticed) {
            emitIn(TransactionPhase.AFTER_ROLLBACK, noticed);
        }

        @TransactionalEventListener(phase = TransactionPhase.AFTER_COMPLETION)
        void afterCompletion(Noticed noticed) {
            emitIn(TransactionPhase.AFTER_COMPLETION, noticed);
        }

        private void emitIn(TransactionPhase phase, Noticed noticed) {
            if (noticed.phase() != phase) {
                return;
            }
            try {
                outcomes.add(this.outbox.emit(EVENT, noticed.key(), Map.of("phase", phase.name())));
            } catch (RuntimeException ex) {
                outcomes.add(ex);
            }
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String EXCHANGE = rabbit.topicExchange("emits-during-commit");

    private static final String QUEUE = rabbit.uniqueName("emits-during-commit");

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("emitsduringcommit").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add("idempotency.outbox.destination", () -> EXCHANGE);
    }

    @BeforeAll
    static void queue() throws Exception {
        try (var connection = rabbit.newConnection();
                var channel = connection.createChannel()) {
            channel.queueDeclare(QUEUE, false, false, false, Map.of());
            channel.queueBind(QUEUE, EXCHANGE, "#");
        }
    }

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    /** The events that reached the queue bound to the outbox's destination. */
    private final List<UUID> arrived = new CopyOnWriteArrayList<>();

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    ApplicationEventPublisher events;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    DataSource dataSource;

    @Autowired
    Outbox outbox;

    @Autowired
    JdbcConnectionDetails connectionDetails;

    @BeforeEach
    void clean() {
        this.jdbc.execute("CREATE TABLE IF NOT EXISTS noticed_effect (key text NOT NULL)");
        this.jdbc.execute("TRUNCATE noticed_effect");
        rabbit.purge(QUEUE);
        outcomes.clear();
    }

    @Test
    void theFirstEventOfATransactionEmittedByABeforeCommitListenerIsWrittenWithItsEffectAndPublished() {
        noticeIn("first-before-commit", TransactionPhase.BEFORE_COMMIT, false);

        assertThat(outcomes).singleElement().isInstanceOf(UUID.class);
        assertThat(effects("first-before-commit")).isEqualTo(1);
        assertThat(rows("first-before-commit")).isEqualTo(1);
        assertPublished((UUID) outcomes.get(0));
    }

    @Test
    void aBeforeCommitListenerEmitsAfterTheTransactionsOwnEventsToo() {
        UUID own = noticeIn("also-before-commit", TransactionPhase.BEFORE_COMMIT, true);

        assertThat(outcomes).singleElement().isInstanceOf(UUID.class);
        assertThat(rows("also-before-commit")).isEqualTo(2);
        assertPublished(own);
        assertPublished((UUID) outcomes.get(0));
    }

    @Test
    void anEmitFromABeforeCompletionCallbackIsWrittenWithItsEffect() {
        UUID[] emitted = new UUID[1];
        this.transactions.executeWithoutResult(status -> {
            this.jdbc.update("INSERT INTO noticed_effect (key) VALUES ('before-completion')");
            TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                @Override
                public void beforeCompletion() {
                    emitted[0] = outbox.emit(EVENT, "before-completion", Map.of());
                }
            });
        });

        assertThat(rows("before-completion")).isEqualTo(1);
        assertPublished(emitted[0]);
    }

    @Test
    void aTransactionOfItsOwnOpenedAsTheOuterOneCommitsEmitsTheOuterOnesKeyWithoutWaitingForIt() {
        CompletableFuture<UUID> outer = CompletableFuture.supplyAsync(() -> this.transactions.execute(status -> {
            UUID own = this.outbox.emit(EVENT, "audited", Map.of("own", true));
            this.events.publishEvent(new Audited("audited"));
            return own;
        }));

        assertThat(outer)
                .as("the outer transaction, whose listener's inner transaction emits its key")
                .succeedsWithin(Duration.ofSeconds(20));
        assertThat(outcomes).singleElement().isInstanceOf(UUID.class);
        assertThat(this.jdbc.queryForList(
                        "SELECT id FROM outbox_event WHERE aggregateid = 'audited' ORDER BY position", UUID.class))
                .as("the inner transaction's event, committed first, then the outer one's")
                .containsExactly((UUID) outcomes.get(0), outer.join());
    }

    @Test
    void anEmitFromAnAfterCommitListenerThrowsAtTheListenerAndWritesNothing() {
        noticeIn("after-commit", TransactionPhase.AFTER_COMMIT, false);

        assertRefusedOnceTheCommitBegan("after-commit");
        assertThat(effects("after-commit")).as("the effect committed").isEqualTo(1);
    }

    @Test
    void anEmitFromAnAfterCompletionListenerThrowsAtTheListenerAndWritesNothing() {
        noticeIn("after-completion", TransactionPhase.AFTER_COMPLETION, false);

        assertRefusedOnceTheCommitBegan("after-completion");
    }

    @Test
    void anEmitFromAnAfterRollbackListenerThrowsAtTheListenerAndWritesNothing() {
        this.transactions.executeWithoutResult(status -> {
            this.events.publishEvent(new Noticed("after-rollback", TransactionPhase.AFTER_ROLLBACK));
            status.setRollbackOnly();
        });

        assertRefusedOnceTheCommitBegan("after-rollback");
    }

    @Test
    void anEmitFromAnAfterCommitCallbackThrowsToTheCallerOfTheCommit() {
        assertThatThrownBy(() -> this.transactions.executeWithoutResult(status ->
                        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                            @Override
                            public void afterCommit() {
                                outbox.emit(EVENT, "after-commit-callback", Map.of());
                            }
                        })))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("once the transaction's commit or rollback began");
        assertThat(rows("after-commit-callback")).isZero();
    }

    @Test
    void anEmitInATransactionOfAManagerTheOutboxDoesNotFollowIsRefused() {
        TransactionTemplate unfollowed = new TransactionTemplate(new DataSourceTransactionManager(this.dataSource));

        assertThatThrownBy(() ->
                        unfollowed.executeWithoutResult(status -> this.outbox.emit(EVENT, "unfollowed", Map.of())))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("Outbox.transactionListener()");
    }

    @Test
    void aTransactionOfAnotherManagerInsideTheTransactionLeavesItsEventsToBeWritten() {
        // Another resource's manager (here another DataSource object on the same database), not a bean.
        TransactionTemplate other =
                new TransactionTemplate(new DataSourceTransactionManager(new DriverManagerDataSource(
                        this.connectionDetails.getJdbcUrl(),
                        this.connectionDetails.getUsername(),
                        this.connectionDetails.getPassword())));

        List<UUID> ids = this.transactions.execute(status -> {
            UUID before = this.outbox.emit(EVENT, "around-another", Map.of("n", 1));
            other.executeWithoutResult(inner -> {});
            UUID after = this.outbox.emit(EVENT, "around-another", Map.of("n", 2));
            return List.of(before, after);
        });

        assertThat(this.jdbc.queryForList(
                        "SELECT id FROM outbox_event WHERE aggregateid = 'around-another' ORDER BY position",
                        UUID.class))
                .isEqualTo(ids);
    }

    /** Writes the effect, publishes the application event for the phase's listener, and maybe emits first. */
    private UUID noticeIn(String key, TransactionPhase phase, boolean emitFirst) {
        return this.transactions.execute(status -> {
            this.jdbc.update("INSERT INTO noticed_effect (key) VALUES (?)", key);
            UUID own = emitFirst ? this.outbox.emit(EVENT, key, Map.of("own", true)) : null;
            this.events.publishEvent(new Noticed(key, phase));
            return own;
        });
    }

    private void assertRefusedOnceTheCommitBegan(String key) {
        assertThat(outcomes)
                .singleElement()
                .isInstanceOfSatisfying(
                        IllegalStateException.class,
                        ex -> assertThat(ex).hasMessageContaining("once the transaction's commit or rollback began"));
        assertThat(rows(key)).isZero();
    }

    private void assertPublished(UUID id) {
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.jdbc.queryForObject(
                                "SELECT published_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, id))
                        .isTrue());
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            rabbit.drain(QUEUE)
                    .forEach(message ->
                            arrived.add(CODEC.decode(message.getBody()).eventId()));
            return arrived.contains(id);
        });
    }

    private int effects(String key) {
        return this.jdbc.queryForObject("SELECT count(*) FROM noticed_effect WHERE key = ?", Integer.class, key);
    }

    private int rows(String key) {
        return this.jdbc.queryForObject("SELECT count(*) FROM outbox_event WHERE aggregateid = ?", Integer.class, key);
    }
}
