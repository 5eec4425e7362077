package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import com.zaxxer.hikari.HikariDataSource;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutboxProperties;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.ResourcelessTransactionManager;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.observability.IdempotencyEndpoint;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.StreamBridge;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.ConfigurableTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionExecution;
import org.springframework.transaction.TransactionExecutionListener;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The outbox on a real RabbitMQ and PostgreSQL: what a guarded function returns, and what code emits with
 * {@link Outbox#emit}, is published after its transaction committed, never before, once per event id, in order per
 * key, by one relay at a time, without skipping a row that committed late.
 */
@SpringBootTest(
        classes = OutboxOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|noticeThing;idempotencyGuard|auditThing",
            "spring.cloud.stream.default-binder=rabbit",
            // Only a commit wakes the relay up in these tests (or a test's own run), so that what it does is theirs.
            "idempotency.outbox.relay.poll-interval=1h",
            "idempotency.outbox.relay.lag-bound=1s"
        })
@EnableIdempotencyTestKit(testBinder = false)
class OutboxOnRabbitIT {

    /** An amount whose effect makes the commit fail. */
    static final BigDecimal FAILS_AT_COMMIT = new BigDecimal("13.000");

    static final String NOTICED = "test.thing.noticed.v1";

    static final String AUDITED = "test.thing.audited.v1";

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        /**
         * The order a loaded machine gives now and then, given every time: the connection's thread hands the broker's
         * closing of a publisher's channel on late, after the publishing thread found the channel closed and closed it
         * too. That close knows no reason, and its nack of the pending confirm comes first.
         */
        @Bean
        static BeanPostProcessor lateChannelShutdowns() {
            return new BeanPostProcessor() {
                @Override
                public Object postProcessAfterInitialization(Object bean, String beanName) {
                    if (bean instanceof CachingConnectionFactory factory
                            && factory.getPublisherConnectionFactory() instanceof CachingConnectionFactory publisher) {
                        publisher.setExecutor(new LateFromConnectionThreads());
                    }
                    return bean;
                }
            };
        }

        /** Where the relay counts what it published. */
        @Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }

        /** A function whose result is an event: published through the outbox. */
        @Bean
        Function<ThingHappened, OutgoingEvent> noticeThing(JdbcTemplate jdbcTemplate) {
            return thing -> {
                jdbcTemplate.update(
                        "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
                if (thing.amount().compareTo(FAILS_AT_COMMIT) == 0) {
                    jdbcTemplate.update("INSERT INTO thing_commit_check (parent_id) VALUES (?)", UUID.randomUUID());
                }
                return new OutgoingEvent(
                        NOTICED,
                        thing.thingId().toString(),
                        Map.of("thingId", thing.thingId().toString()));
            };
        }

        /** A consumer that emits with the outbox's API. */
        @Bean
        Consumer<ThingHappened> auditThing(JdbcTemplate jdbcTemplate, Outbox outbox) {
            return thing -> {
                jdbcTemplate.update("INSERT INTO thing_audit (thing_id) VALUES (?)", thing.thingId());
                outbox.emit(
                        AUDITED,
                        thing.thingId().toString(),
                        Map.of("thingId", thing.thingId().toString()));
            };
        }
    }

    /** Runs what a connection's thread hands on (a channel's shutdown) half a second late, the rest at once. */
    static final class LateFromConnectionThreads extends AbstractExecutorService {

        private final ExecutorService threads = Executors.newCachedThreadPool(task -> {
            Thread thread = new Thread(task);
            thread.setDaemon(true);
            return thread;
        });

        @Override
        public void execute(Runnable task) {
            if (Thread.currentThread().getName().startsWith("AMQP Connection")) {
                this.threads.execute(() -> {
                    try {
                        // The fault itself, not a wait for an outcome: the hand-off runs late, whatever else happens.
                        Thread.sleep(500);
                    } catch (InterruptedException ex) {
                        Thread.currentThread().interrupt();
                    }
                    task.run();
                });
            } else {
                this.threads.execute(task);
            }
        }

        @Override
        public void shutdown() {
            this.threads.shutdown();
        }

        @Override
        public List<Runnable> shutdownNow() {
            return this.threads.shutdownNow();
        }

        @Override
        public boolean isShutdown() {
            return this.threads.isShutdown();
        }

        @Override
        public boolean isTerminated() {
            return this.threads.isTerminated();
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
            return this.threads.awaitTermination(timeout, unit);
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String NOTICE_INPUT = rabbit.uniqueName("outbox-notice");

    private static final String AUDIT_INPUT = rabbit.uniqueName("outbox-audit");

    private static final String OUTPUT = rabbit.topicExchange("outbox-out");

    /**
     * An exchange the binder may not declare, and that does not exist until a test declares it. Named without a dot,
     * as a binding name in a property must be.
     */
    private static final String LATE_EXCHANGE =
            rabbit.deleteAtExit(rabbit.uniqueName("outbox-late").replace('.', '-'));

    private static final String EMITTED = rabbit.uniqueName("outbox-emitted");

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("outbox").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add("idempotency.outbox.destination", () -> OUTPUT);
        Map.of("idempotencyGuardnoticeThing", NOTICE_INPUT, "idempotencyGuardauditThing", AUDIT_INPUT)
                .forEach((binding, destination) -> {
                    rabbit.deleteAtExit(destination + ".things");
                    String in = "spring.cloud.stream.bindings." + binding + "-in-0.";
                    registry.add(in + "destination", () -> destination);
                    registry.add(in + "group", () -> "things");
                    registry.add(in + "consumer.max-attempts", () -> "2");
                    registry.add(in + "consumer.back-off-initial-interval", () -> "1");
                });
        registry.add("spring.cloud.stream.bindings.idempotencyGuardnoticeThing-out-0.destination", () -> OUTPUT);
        registry.add(
                "spring.cloud.stream.rabbit.bindings." + LATE_EXCHANGE + ".producer.declare-exchange", () -> "false");
    }

    @BeforeAll
    static void captureEmitted() throws Exception {
        // A publication to an exchange that does not exist closes its channel; Spring AMQP's channel cache then throws
        // on a thread of its own, which would fail whichever wait of these tests is under way.
        Awaitility.doNotCatchUncaughtExceptionsByDefault();
        try (Connection connection = rabbit.newConnection();
                Channel channel = connection.createChannel()) {
            channel.queueDeclare(EMITTED, true, false, false, Map.of());
            channel.queueBind(EMITTED, OUTPUT, "#");
        }
    }

    @AfterAll
    static void resetAwaitility() {
        Awaitility.reset();
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    MeterRegistry meterRegistry;

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    Outbox outbox;

    @Autowired
    OutboxRelay relay;

    @Autowired
    DataSource dataSource;

    @Autowired
    IdempotencyProperties properties;

    @Autowired
    @Qualifier("outboxHealthIndicator")
    HealthIndicator outboxHealth;

    @Autowired
    StreamBridge streamBridge;

    @Autowired
    BinderFactory binderFactory;

    @Autowired
    List<PublishConfirmation> confirmations;

    @Autowired
    BindingServiceProperties bindings;

    @Autowired
    BindingService bindingService;

    @Autowired
    JdbcConnectionDetails connectionDetails;

    /** Runs what {@link #onceTheOutboxWrote} bound, in the commit, after the outbox's listener wrote the rows. */
    private static final TransactionExecutionListener AFTER_THE_OUTBOX = new TransactionExecutionListener() {
        @Override
        public void beforeCommit(TransactionExecution transaction) {
            if (TransactionSynchronizationManager.getResource(AFTER_THE_OUTBOX) instanceof Runnable action) {
                action.run();
            }
        }

        @Override
        public void afterCommit(TransactionExecution transaction, @Nullable Throwable commitFailure) {
            TransactionSynchronizationManager.unbindResourceIfPossible(AFTER_THE_OUTBOX);
        }

        @Override
        public void afterRollback(TransactionExecution transaction, @Nullable Throwable rollbackFailure) {
            TransactionSynchronizationManager.unbindResourceIfPossible(AFTER_THE_OUTBOX);
        }
    };

    /** Runs the action in the commit of the transaction under way, once the outbox wrote its rows, their keys locked. */
    static void onceTheOutboxWrote(Runnable action) {
        TransactionSynchronizationManager.bindResource(AFTER_THE_OUTBOX, action);
    }

    @BeforeEach
    void followTheCommits() {
        // Added after the outbox's own listener (on the manager since its creation): it runs after it.
        ConfigurableTransactionManager manager =
                (ConfigurableTransactionManager) this.transactions.getTransactionManager();
        if (!manager.getTransactionExecutionListeners().contains(AFTER_THE_OUTBOX)) {
            manager.addListener(AFTER_THE_OUTBOX);
        }
    }

    @BeforeEach
    void publishWhatIsLeftAndDrain() {
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            this.relay.publishPending();
            return unpublished() == 0;
        });
        rabbit.drain(EMITTED);
    }

    @Test
    void aFunctionsEventIsPublishedAfterTheCommitWithTheIdItWasWrittenWithAndOnceForTwoCopies() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(NOTICE_INPUT, event);
        rabbit.publish(NOTICE_INPUT, event);

        // Both copies attempted (and the first committed) before anything is counted: the checks of what the copy did
        // not do would pass while it waits in the queue.
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(this.recorder.attempts(event.eventId()))
                        .hasSize(2)
                        .allSatisfy(attempt -> assertThat(attempt.failure()).isNull()));
        this.relay.publishPending();
        List<GetResponse> emitted = awaitEmitted(1);
        EventEnvelope<?> published = CODEC.decode(emitted.get(0).getBody());
        assertThat(published.eventName()).isEqualTo(NOTICED);
        assertThat(published.payload().toString())
                .contains(event.payload().thingId().toString());
        assertThat(emitted.get(0).getEnvelope().getRoutingKey()).isEqualTo(NOTICED);
        assertThat(emitted.get(0).getProps().getMessageId())
                .isEqualTo(published.eventId().toString());
        // The relay marks the row once the broker confirmed it: the message may arrive before that commits.
        await().atMost(Duration.ofSeconds(10))
                .untilAsserted(() -> assertThat(this.jdbcTemplate.queryForList(
                                "SELECT aggregateid FROM outbox_event WHERE id = ? AND published_at IS NOT NULL",
                                String.class,
                                published.eventId()))
                        .as("the row, keyed by the thing, marked published")
                        .containsExactly(event.payload().thingId().toString()));
        assertThat(rabbit.messageCount(NOTICE_INPUT + ".things")).isZero();
        assertThat(rabbit.messageCount(EMITTED)).as("the copy emitted nothing").isZero();
    }

    @Test
    void aFunctionWhoseCommitFailsEmitsNothing() {
        EventEnvelope<ThingHappened> failing = new EventEnvelope<>(
                UUID.randomUUID(),
                ThingHappened.NAME,
                Instant.now(),
                new ThingHappened(UUID.randomUUID(), FAILS_AT_COMMIT));

        rabbit.publish(NOTICE_INPUT, failing);

        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(rabbit.messageCount(NOTICE_INPUT + ".things.dlq"))
                        .isEqualTo(1));
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        failing.payload().thingId()))
                .as("the effect rolled back")
                .isZero();
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = ?",
                        Integer.class,
                        failing.payload().thingId().toString()))
                .as("no outbox row")
                .isZero();
        this.relay.publishPending();
        assertThat(rabbit.messageCount(EMITTED))
                .as("nothing was published for the two attempts whose commit failed")
                .isZero();
        rabbit.drain(NOTICE_INPUT + ".things.dlq");
    }

    @Test
    void aConsumerEmitsWithTheOutboxInItsMessagesTransaction() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        rabbit.publish(AUDIT_INPUT, event);

        List<GetResponse> emitted = awaitEmitted(1);
        EventEnvelope<?> published = CODEC.decode(emitted.get(0).getBody());
        assertThat(published.eventName()).isEqualTo(AUDITED);
        assertThat(emitted.get(0).getEnvelope().getRoutingKey()).isEqualTo(AUDITED);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_audit WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId()))
                .isEqualTo(1);
    }

    /**
     * A name the guard of every consumer dead-letters (INVALID_EVENT_NAME), or one longer than RabbitMQ's routing keys,
     * which the relay could never publish, is refused to the caller as it emits: nothing of it is written.
     */
    @ParameterizedTest
    @ValueSource(strings = {"audit thing", "audit.thing\nforged log line", ".audit", "LONGER_THAN_255"})
    void anEventNameNoConsumerWouldTakeIsRefusedAsItIsEmitted(String name) {
        String eventName = name.equals("LONGER_THAN_255") ? "x".repeat(256) : name;
        assertThatIllegalArgumentException()
                .isThrownBy(() -> this.transactions.executeWithoutResult(
                        status -> this.outbox.emit(eventName, "invalid-name", Map.of("n", 1))))
                .withMessageContaining("INVALID_EVENT_NAME");

        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = 'invalid-name'", Integer.class))
                .isZero();
    }

    @Test
    void aTransactionalMethodEmitsAndARollbackLeavesNothingWhileOutsideATransactionEmitRefuses() {
        assertThatIllegalStateException()
                .isThrownBy(() -> this.outbox.emit(AUDITED, "k", Map.of("n", 1)))
                .withMessageContaining("no transaction on the service's DataSource is under way");

        this.transactions.executeWithoutResult(status -> {
            this.outbox.emit(AUDITED, "rolled-back", Map.of("n", 1));
            status.setRollbackOnly();
        });
        UUID committed = this.transactions.execute(status -> this.outbox.emit(AUDITED, "committed", Map.of("n", 2)));

        List<GetResponse> emitted = awaitEmitted(1);
        assertThat(CODEC.decode(emitted.get(0).getBody()).eventId()).isEqualTo(committed);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = 'rolled-back'", Integer.class))
                .isZero();
    }

    @Test
    void aRowThatCommitsAfterARowWrittenLaterIsPublishedToo() throws Exception {
        CountDownLatch written = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);
        CompletableFuture<UUID> first = CompletableFuture.supplyAsync(() -> this.transactions.execute(status -> {
            UUID id = this.outbox.emit(AUDITED, "first", Map.of("n", 1));
            written.countDown();
            release(commit);
            return id;
        }));
        assertThat(written.await(10, TimeUnit.SECONDS)).isTrue();
        UUID second = this.transactions.execute(status -> this.outbox.emit(AUDITED, "second", Map.of("n", 2)));

        assertThat(eventIds(awaitEmitted(1))).containsExactly(second);
        commit.countDown();

        assertThat(eventIds(awaitEmitted(1)))
                .as("the row written first, committed last, is published: not skipped for the second's position")
                .containsExactly(first.get(10, TimeUnit.SECONDS));
        awaitEveryRowMarked();
    }

    @Test
    void eventsOfAKeyArePublishedInTheOrderTheyWereWritten() {
        List<UUID> written = new ArrayList<>();
        for (int transaction = 0; transaction < 10; transaction++) {
            written.addAll(this.transactions.execute(status -> IntStream.range(0, 50)
                    .mapToObj(n -> this.outbox.emit(AUDITED, "key-" + (n % 5), Map.of("n", n)))
                    .toList()));
        }

        List<GetResponse> emitted = awaitEmitted(500);

        Map<String, List<UUID>> publishedPerKey = byKey(eventIds(emitted));
        Map<String, List<UUID>> writtenPerKey = byKey(written);
        assertThat(publishedPerKey).isEqualTo(writtenPerKey);
    }

    @Test
    void twoRelaysPublishEachRowOnce() throws Exception {
        OutboxRelay other = otherInstancesRelay(this.dataSource);
        List<UUID> written = this.transactions.execute(status -> IntStream.range(0, 1500)
                .mapToObj(n -> this.outbox.emit(AUDITED, "key-" + (n % 20), Map.of("n", n)))
                .toList());
        AtomicInteger byOther = new AtomicInteger();

        // The other publishes a run's worth alone (500 rows at most), so that it takes part whatever the race that
        // follows; then both run at once until nothing is left.
        byOther.addAndGet(other.publishPending().published());
        this.relay.publishPending();
        assertThat(unpublished()).as("rows left for the two relays at once").isPositive();
        CompletableFuture<Void> second = CompletableFuture.runAsync(() -> {
            while (unpublished() > 0) {
                byOther.addAndGet(other.publishPending().published());
            }
        });
        while (unpublished() > 0) {
            this.relay.publishPending();
        }
        second.get(60, TimeUnit.SECONDS);

        List<UUID> published = eventIds(awaitEmitted(1500));
        assertThat(published).doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(written);
        assertThat(byKey(published)).isEqualTo(byKey(written));
        // This instance's relay also runs on its own, woken by the commit: what it publishes so is not counted.
        assertThat(byOther.get())
                .as("published by the other instance's relay; the rest by this instance's")
                .isPositive()
                .isLessThan(1500);
    }

    @Test
    void aRowTheBrokerDoesNotConfirmStaysUnpublishedUntilItCanAndHoldsBackNoOtherKey() throws Exception {
        UUID[] events = this.transactions.execute(status -> new UUID[] {
            this.outbox
                    .write(LATE_EXCHANGE, List.of(new OutgoingEvent(AUDITED, "late", Map.of("n", 1))))
                    .get(0),
            this.outbox.emit(AUDITED, "on-time", Map.of("n", 2))
        });
        UUID event = events[0];

        try {
            // At once: the broker closes the channel (404), and the nack carries its reason, whichever of the broker's
            // close and the publisher's own close of the channel reaches the pending confirm first. A missing exchange
            // refuses every row of the route: the route is held, and the row counts no attempt.
            await().atMost(Duration.ofSeconds(10))
                    .alias("the route held for the broker's refusal, shown in the outbox's health")
                    .until(
                            () -> String.valueOf(
                                    this.outboxHealth.health().getDetails().get("held")),
                            held -> held.contains(LATE_EXCHANGE + " " + AUDITED)
                                    && held.contains("NOT_FOUND - no exchange"));
            assertThat(this.jdbcTemplate.queryForObject(
                            "SELECT attempts FROM outbox_event WHERE id = ?", Integer.class, event))
                    .as("the attempts of a row whose route the broker refuses")
                    .isZero();
            assertThat(eventIds(awaitEmitted(1)))
                    .as("the row of another key, written after it, is not held back")
                    .containsExactly(events[1]);
            assertThat(unpublished()).isEqualTo(1);
            await().atMost(Duration.ofSeconds(10))
                    .untilAsserted(() -> assertThat(this.outboxHealth.health().getStatus())
                            .as("the row has waited longer than the lag bound: a status of the outbox's own")
                            .isEqualTo(OutboxHealthIndicator.LAGGING));
            assertThat(new IdempotencyEndpoint(this.dataSource, this.properties)
                            .status()
                            .outbox())
                    .as("the idempotency endpoint shows the backlog")
                    .satisfies(outbox -> {
                        assertThat(outbox.unpublished()).isEqualTo(1);
                        assertThat(outbox.lag()).isGreaterThan(Duration.ofSeconds(1));
                    });
        } finally {
            try (Connection connection = rabbit.newConnection();
                    Channel channel = connection.createChannel()) {
                // Its alternate exchange takes what it routes nowhere: the relay, whose hold may end between the two
                // declarations, would otherwise have the row confirmed unrouted, and marked, before the binding exists.
                channel.exchangeDeclare(LATE_EXCHANGE, "topic", true, false, Map.of("alternate-exchange", OUTPUT));
                channel.exchangeBind(OUTPUT, LATE_EXCHANGE, "#");
            }
        }
        try {
            // The relay tries the row again when its route's hold ends, without a commit or a poll to wake it.
            assertThat(eventIds(awaitEmitted(1))).containsExactly(event);
            awaitEveryRowMarked();
            assertThat(this.outboxHealth.health().getStatus()).isEqualTo(Status.UP);
        } finally {
            // Gone again, as the test found it: a subclass runs it again, on another database.
            try (Connection connection = rabbit.newConnection();
                    Channel channel = connection.createChannel()) {
                channel.exchangeDelete(LATE_EXCHANGE);
            }
        }
    }

    @Test
    void twoTransactionsWritingEventsOfOneKeyTakeTheirPositionsInTheOrderTheyCommit() throws Exception {
        CountDownLatch written = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);
        CompletableFuture<UUID> first = CompletableFuture.supplyAsync(() -> this.transactions.execute(status -> {
            UUID id = this.outbox.emit(AUDITED, "one-key", Map.of("n", 1));
            // The row is written, its key locked, and the commit waits.
            onceTheOutboxWrote(() -> {
                written.countDown();
                release(commit);
            });
            return id;
        }));
        assertThat(written.await(10, TimeUnit.SECONDS)).isTrue();

        CompletableFuture<UUID> second = CompletableFuture.supplyAsync(
                () -> this.transactions.execute(status -> this.outbox.emit(AUDITED, "one-key", Map.of("n", 2))));
        await().atMost(Duration.ofSeconds(10))
                .alias("the second writer of the key waits on the first's lock")
                .until(() -> writersWaitingForALock() == 1);
        assertThat(second)
                .as("the second writer of the key waits for the first to end")
                .isNotDone();
        commit.countDown();

        UUID firstId = first.get(10, TimeUnit.SECONDS);
        UUID secondId = second.get(10, TimeUnit.SECONDS);
        assertThat(this.jdbcTemplate.queryForList(
                        "SELECT id FROM outbox_event WHERE aggregateid = 'one-key' ORDER BY position", UUID.class))
                .containsExactly(firstId, secondId);
        assertThat(eventIds(awaitEmitted(2))).containsExactly(firstId, secondId);
    }

    @Test
    void anInnerTransactionOfItsOwnPublishesItsEventsWhenItCommitsWhateverTheOuterOneDoes() {
        TransactionTemplate inner = new TransactionTemplate(this.transactions.getTransactionManager());
        inner.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
        UUID[] innerEvent = new UUID[1];

        this.transactions.executeWithoutResult(outer -> {
            this.outbox.emit(AUDITED, "outer", Map.of("n", 1));
            innerEvent[0] = inner.execute(status -> this.outbox.emit(AUDITED, "inner", Map.of("n", 2)));
            outer.setRollbackOnly();
        });

        assertThat(eventIds(awaitEmitted(1)))
                .as("the inner transaction's commit woke the relay; the outer one's rows rolled back")
                .containsExactly(innerEvent[0]);
        awaitEveryRowMarked();
    }

    @Test
    void aConnectionInAutoCommitUnderAnotherTransactionManagerIsNoTransactionToEmitIn() {
        TransactionTemplate other = new TransactionTemplate(new ResourcelessTransactionManager());

        assertThatIllegalStateException()
                .isThrownBy(() -> other.executeWithoutResult(status -> {
                    // Binds a connection of the DataSource to the transaction's synchronization, in auto-commit.
                    this.jdbcTemplate.queryForObject("SELECT 1", Integer.class);
                    this.outbox.emit(AUDITED, "auto-commit", Map.of("n", 1));
                }))
                .withMessageContaining("no transaction on the service's DataSource is under way");
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = 'auto-commit'", Integer.class))
                .isZero();
    }

    @Test
    void aRunWhoseCommitFailsAfterPublishingLeavesItsRowsUnpublishedAndTheNextRunPublishesThemAgainWithTheirIds() {
        // The database refuses the relay's first mark, as a commit that fails after the broker confirmed (a dropped
        // connection, a failover): the rows went out, and they are still unpublished.
        this.jdbcTemplate.execute("""
                CREATE SEQUENCE outbox_mark_attempt;
                CREATE FUNCTION fail_first_outbox_mark() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF nextval('outbox_mark_attempt') = 1 THEN
                        RAISE EXCEPTION 'the relay''s first mark fails (injected by the test)';
                    END IF;
                    RETURN NULL;
                END $$;
                CREATE TRIGGER fail_first_outbox_mark BEFORE UPDATE ON outbox_event
                    FOR EACH STATEMENT EXECUTE FUNCTION fail_first_outbox_mark()""");
        try {
            double counted = published();
            List<UUID> written = this.transactions.execute(status -> List.of(
                    this.outbox.emit(AUDITED, "marked-late", Map.of("n", 1)),
                    this.outbox.emit(AUDITED, "marked-late", Map.of("n", 2))));

            List<UUID> published = eventIds(awaitEmitted(4));

            assertThat(published)
                    .as("published, not marked, published again by the next run: in order, with the same ids")
                    .containsExactly(written.get(0), written.get(1), written.get(0), written.get(1));
            assertThat(this.jdbcTemplate.queryForObject("SELECT last_value FROM outbox_mark_attempt", Long.class))
                    .as("the first mark failed, the second committed")
                    .isEqualTo(2);
            awaitEveryRowMarked();
            await().atMost(Duration.ofSeconds(10))
                    .alias("the copies counted as published too")
                    .until(() -> published() - counted, value -> value == 4);
        } finally {
            this.jdbcTemplate.execute("DROP TRIGGER fail_first_outbox_mark ON outbox_event;"
                    + " DROP FUNCTION fail_first_outbox_mark(); DROP SEQUENCE outbox_mark_attempt");
        }
    }

    @Test
    void aPeriodRepublishedGoesOutAgainInOrderWithTheIdsItWasWrittenWith() {
        Instant from = Instant.now().minusMillis(1);
        List<UUID> written = this.transactions.execute(status -> List.of(
                this.outbox.emit(AUDITED, "replayed", Map.of("n", 1)),
                this.outbox.emit(AUDITED, "replayed", Map.of("n", 2))));
        assertThat(eventIds(awaitEmitted(2))).containsExactlyElementsOf(written);

        int republished = this.outbox.republish(from, Instant.now().plusSeconds(1));

        assertThat(republished).isEqualTo(2);
        assertThat(eventIds(awaitEmitted(2))).containsExactlyElementsOf(written);
        awaitEveryRowMarked();
    }

    @Test
    void anInnerTransactionEmittingAKeyItsSuspendedOuterTransactionEmittedDoesNotHang() {
        TransactionTemplate inner = new TransactionTemplate(this.transactions.getTransactionManager());
        inner.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);

        CompletableFuture<List<UUID>> emitted = CompletableFuture.supplyAsync(() -> this.transactions.execute(outer -> {
            UUID outerEvent = this.outbox.emit(AUDITED, "nested", Map.of("n", 1));
            UUID innerEvent = inner.execute(status -> this.outbox.emit(AUDITED, "nested", Map.of("n", 2)));
            return List.of(innerEvent, outerEvent);
        }));

        assertThat(emitted)
                .as("the inner transaction commits, then the outer one")
                .succeedsWithin(Duration.ofSeconds(10));
        assertThat(eventIds(awaitEmitted(2)))
                .as("in the order the transactions committed")
                .containsExactlyElementsOf(emitted.join());
    }

    @Test
    void eventsEmittedInANestedTransactionRolledBackToItsSavepointAreNotPublished() {
        TransactionTemplate nested = new TransactionTemplate(this.transactions.getTransactionManager());
        nested.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);

        UUID kept = this.transactions.execute(outer -> {
            UUID event = this.outbox.emit(AUDITED, "kept", Map.of("n", 1));
            nested.executeWithoutResult(status -> {
                this.outbox.emit(AUDITED, "rolled-back-to-its-savepoint", Map.of("n", 2));
                status.setRollbackOnly();
            });
            return event;
        });

        assertThat(eventIds(awaitEmitted(1))).containsExactly(kept);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = 'rolled-back-to-its-savepoint'",
                        Integer.class))
                .isZero();
    }

    /** The same when the nested transaction emits the transaction's first event: its savepoint came before it. */
    @Test
    void theFirstEventsOfATransactionEmittedInANestedTransactionRolledBackAreNotPublished() {
        TransactionTemplate nested = new TransactionTemplate(this.transactions.getTransactionManager());
        nested.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);

        UUID kept = this.transactions.execute(outer -> {
            nested.executeWithoutResult(status -> {
                this.outbox.emit(AUDITED, "first-and-rolled-back", Map.of("n", 1));
                status.setRollbackOnly();
            });
            return this.outbox.emit(AUDITED, "emitted-after", Map.of("n", 2));
        });

        assertThat(eventIds(awaitEmitted(1))).containsExactly(kept);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM outbox_event WHERE aggregateid = 'first-and-rolled-back'", Integer.class))
                .isZero();
    }

    @Test
    void twoTransactionsEmittingTwoKeysInOppositeOrdersBothCommit() throws Exception {
        CountDownLatch firstEmittedA = new CountDownLatch(1);
        CountDownLatch secondEmittedB = new CountDownLatch(1);
        CompletableFuture<Void> first = CompletableFuture.runAsync(() -> this.transactions.executeWithoutResult(s -> {
            this.outbox.emit(AUDITED, "key-a", Map.of("by", "first"));
            firstEmittedA.countDown();
            release(secondEmittedB);
            this.outbox.emit(AUDITED, "key-b", Map.of("by", "first"));
        }));
        CompletableFuture<Void> second = CompletableFuture.runAsync(() -> this.transactions.executeWithoutResult(s -> {
            release(firstEmittedA);
            this.outbox.emit(AUDITED, "key-b", Map.of("by", "second"));
            secondEmittedB.countDown();
            this.outbox.emit(AUDITED, "key-a", Map.of("by", "second"));
        }));

        assertThat(CompletableFuture.allOf(first, second))
                .as("neither is chosen as a deadlock's victim")
                .succeedsWithin(Duration.ofSeconds(30));
        assertThat(eventIds(awaitEmitted(4))).hasSize(4);
    }

    @Test
    void aTransactionEmittingTenThousandDistinctKeysTakesNoPlaceInTheSharedLockTablePerKey() {
        int[] locksAtCommit = new int[1];
        List<UUID> written = this.transactions.execute(status -> {
            onceTheOutboxWrote(() -> locksAtCommit[0] = lockTableEntriesHeld());
            return this.outbox.write(
                    OUTPUT,
                    IntStream.range(0, 10_000)
                            .mapToObj(n -> new OutgoingEvent(AUDITED, "distinct-" + n, Map.of("n", n)))
                            .toList());
        });

        assertThat(written).hasSize(10_000).doesNotHaveDuplicates();
        assertThat(locksAtCommit[0])
                .as(
                        "the entries of the server's shared lock table the transaction holds as it commits, its keys locked")
                .isLessThan(64);
        await().atMost(Duration.ofSeconds(120)).until(() -> unpublished() == 0);
        rabbit.purge(EMITTED);
    }

    @Test
    void twoTransactionsWritingEventsOfDisjointKeysDoNotWaitForEachOther() throws Exception {
        CountDownLatch written = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);
        CompletableFuture<List<UUID>> first = CompletableFuture.supplyAsync(() -> this.transactions.execute(status -> {
            // Its keys locked, the commit waits.
            onceTheOutboxWrote(() -> {
                written.countDown();
                release(commit);
            });
            return this.outbox.write(OUTPUT, keys("disjoint-a-", 100));
        }));
        assertThat(written.await(10, TimeUnit.SECONDS)).isTrue();
        try {
            CompletableFuture<List<UUID>> second = CompletableFuture.supplyAsync(
                    () -> this.transactions.execute(status -> this.outbox.write(OUTPUT, keys("disjoint-b-", 100))));

            assertThat(second)
                    .as("a transaction of 100 keys, beside another of 100 other keys that holds its commit")
                    .succeedsWithin(Duration.ofSeconds(10));
        } finally {
            commit.countDown();
        }
        assertThat(first.get(10, TimeUnit.SECONDS)).hasSize(100);
        await().atMost(Duration.ofSeconds(60)).until(() -> unpublished() == 0);
        rabbit.purge(EMITTED);
    }

    private static List<OutgoingEvent> keys(String prefix, int count) {
        return IntStream.range(0, count)
                .mapToObj(n -> new OutgoingEvent(AUDITED, prefix + n, Map.of("n", n)))
                .toList();
    }

    @Test
    void theLagCountsFromTheCommitAndARepublicationNotFromWhenTheTransactionBegan() {
        this.transactions.executeWithoutResult(status -> {
            this.outbox.emit(AUDITED, "slow-transaction", Map.of("n", 1));
            sleep(3);
        });
        awaitEmitted(1);
        assertThat(lag())
                .as("the lag of an event of a transaction that lasted 3 s")
                .isLessThan(1.0);

        UUID old = this.transactions.execute(status -> this.outbox.emit(AUDITED, "written-long-ago", Map.of("n", 2)));
        awaitEmitted(1);
        backdate(old, 2);
        this.outbox.republish(
                Instant.now().minus(Duration.ofDays(3)), Instant.now().minus(Duration.ofDays(1)));
        awaitEmitted(1);
        assertThat(lag())
                .as("the lag of an event written two days ago, republished now")
                .isLessThan(1.0);
    }

    @Test
    void aRowCommittedWhileAnotherInstancesRelayRunsIsPublishedSoonAfterThatRunEnds() throws Exception {
        UUID held = UuidV7.generate();
        this.jdbcTemplate.update(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES (?, ?, ?, ?, '{}')",
                held,
                OUTPUT,
                "held",
                AUDITED);
        try (HikariDataSource otherInstance = new HikariDataSource()) {
            otherInstance.setJdbcUrl(this.connectionDetails.getJdbcUrl());
            otherInstance.setUsername(this.connectionDetails.getUsername());
            otherInstance.setPassword(this.connectionDetails.getPassword());
            OutboxRelay other = otherInstancesRelay(otherInstance);
            CountDownLatch locked = new CountDownLatch(1);
            CountDownLatch unlock = new CountDownLatch(1);
            // The other instance's run publishes the row, then waits to mark it: the test holds the row's lock.
            CompletableFuture<Void> holder =
                    CompletableFuture.runAsync(() -> this.transactions.executeWithoutResult(status -> {
                        this.jdbcTemplate.queryForList(
                                "SELECT id FROM outbox_event WHERE id = ? FOR UPDATE", UUID.class, held);
                        locked.countDown();
                        release(unlock);
                    }));
            assertThat(locked.await(10, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<OutboxRelay.Run> otherRun = CompletableFuture.supplyAsync(other::publishPending);
            assertThat(eventIds(awaitEmitted(1))).containsExactly(held);

            UUID fresh = this.transactions.execute(status -> this.outbox.emit(AUDITED, "fresh", Map.of("n", 1)));
            unlock.countDown();
            holder.get(10, TimeUnit.SECONDS);
            assertThat(otherRun.get(10, TimeUnit.SECONDS).published()).isEqualTo(1);

            assertThat(eventIds(awaitEmitted(1)))
                    .as("the row this instance committed while the other's relay ran, published without a poll")
                    .containsExactly(fresh);
        }
    }

    /** A relay as another instance of the service has, on that DataSource, run only by the test. */
    private OutboxRelay otherInstancesRelay(DataSource dataSource) {
        return new OutboxRelay(
                dataSource,
                new OutboxSender(
                        this.streamBridge,
                        this.binderFactory,
                        this.bindings,
                        this.bindingService,
                        CODEC,
                        new StandardEnvironment(),
                        Duration.ofSeconds(30),
                        Duration.ofSeconds(1),
                        Duration.ofSeconds(30),
                        this.confirmations),
                OUTPUT,
                new OutboxProperties.Relay(
                        true,
                        50,
                        Duration.ofHours(1),
                        Duration.ZERO,
                        Duration.ofSeconds(30),
                        Duration.ofMinutes(5),
                        10,
                        Duration.ofSeconds(1),
                        Duration.ofSeconds(30)),
                IdempotencyMetrics.NONE);
    }

    private double lag() {
        return this.meterRegistry
                .get(MicrometerIdempotencyMetrics.OUTBOX_LAG)
                .gauge()
                .value();
    }

    private double published() {
        return this.meterRegistry
                .counter(MicrometerIdempotencyMetrics.OUTBOX_PUBLISHED)
                .count();
    }

    /** The broker confirms a publish, and may deliver it, before the relay's transaction marks its row. */
    private void awaitEveryRowMarked() {
        await().atMost(Duration.ofSeconds(10))
                .alias("every row marked published")
                .until(() -> unpublished() == 0);
    }

    private int unpublished() {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class);
    }

    private Map<String, List<UUID>> byKey(List<UUID> events) {
        Map<UUID, String> keys = new LinkedHashMap<>();
        this.jdbcTemplate.query("SELECT id, aggregateid FROM outbox_event", row -> {
            keys.put(row.getObject(1, UUID.class), row.getString(2));
        });
        return events.stream().collect(Collectors.groupingBy(keys::get, Collectors.toList()));
    }

    /** Waits for that many messages in the queue of emitted events, takes them, and checks no more come. */
    private static List<GetResponse> awaitEmitted(int count) {
        List<GetResponse> emitted = new ArrayList<>();
        await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
            emitted.addAll(rabbit.drain(EMITTED));
            assertThat(emitted).hasSizeGreaterThanOrEqualTo(count);
        });
        assertThat(emitted).hasSize(count);
        return emitted;
    }

    private static List<UUID> eventIds(List<GetResponse> messages) {
        return messages.stream()
                .map(message -> CODEC.decode(message.getBody()).eventId())
                .toList();
    }

    /** How many transactions wait, now, for a lock another holds (a key's, in these tests). */
    int writersWaitingForALock() {
        Integer waiting = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        + " AND wait_event_type = 'Lock'",
                Integer.class);
        return waiting != null ? waiting : 0;
    }

    /** How many entries of the server's shared lock table the transaction under way holds (PostgreSQL's pg_locks). */
    int lockTableEntriesHeld() {
        Integer held = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()", Integer.class);
        return held != null ? held : 0;
    }

    /** Sleeps that long on the database, in the transaction under way. */
    void sleep(int seconds) {
        this.jdbcTemplate.execute("SELECT pg_sleep(" + seconds + ")");
    }

    /** Makes the row as written that many days ago. */
    void backdate(UUID id, int days) {
        this.jdbcTemplate.update(
                "UPDATE outbox_event SET occurred_at = now() - make_interval(days => ?) WHERE id = ?", days, id);
    }

    /** Waits until the test lets the transaction commit. */
    private static void release(CountDownLatch latch) {
        try {
            if (!latch.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not released");
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }
}
