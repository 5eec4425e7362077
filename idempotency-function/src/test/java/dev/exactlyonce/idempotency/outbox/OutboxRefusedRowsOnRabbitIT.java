package dev.exactlyonce.idempotency.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.SharedServers;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.outbox.ParkedOutboxEvents.Parked;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.IntStream;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.context.TestPropertySource;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;
import tools.jackson.core.JsonGenerator;
import tools.jackson.databind.SerializationContext;
import tools.jackson.databind.ValueSerializer;
import tools.jackson.databind.module.SimpleModule;
import tools.jackson.databind.util.RawValue;

/**
 * The outbox relay when the broker refuses rows, on a real RabbitMQ and PostgreSQL: a refused row holds back its own
 * key only, and is parked after {@code max-attempts} refusals; a route the broker refuses holds back its own keys
 * only, however many rows they have, and slows nothing else; a broker that stops confirming holds a run for
 * {@code confirm-timeout}, not once per wave; an {@link Error} on the relay's thread does not end the relay.
 *
 * <p>The broker refuses for real: a row over its message size limit (lowered for the test) is refused for what it
 * is (the channel closed with 406); the rows to an exchange whose only queue is full and rejects what it is given
 * ({@code x-overflow: reject-publish}) are refused for where they go (a {@code basic.nack}).
 */
@SpringBootTest(
        classes = OutboxRefusedRowsOnRabbitIT.Service.class,
        properties = {
            "spring.cloud.stream.default-binder=rabbit",
            "spring.cloud.function.definition=",
            // Only a commit wakes the relay up, or a key's back-off ending: what it does is the tests'.
            "idempotency.outbox.relay.poll-interval=1h",
            "idempotency.outbox.relay.confirm-timeout=1s",
            "idempotency.outbox.relay.max-attempts=2",
            "management.endpoint.outbox.access=unrestricted",
            "management.endpoints.web.exposure.include=outbox"
        })
@EnableIdempotencyTestKit(testBinder = false)
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
@SharedServers.Alone(SharedServers.Server.RABBITMQ_NODE)
class OutboxRefusedRowsOnRabbitIT {

    static final String EMITTED_EVENT = "test.thing.noticed.v1";

    /** The broker's message size limit while the tests run: a row with {@link #OVERSIZED} in its payload is over it. */
    static final int MAX_MESSAGE_SIZE = 16_384;

    static final String OVERSIZED = "x".repeat(2 * MAX_MESSAGE_SIZE);

    /** What makes the envelope of a row whose payload holds it throw an {@link Error} on the relay's thread. */
    static final String FATAL_EVENT = "test.thing.fatal.v1";

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }

        /**
         * A codec that fails with an {@link Error} as the relay writes the envelope of a row of {@link #FATAL_EVENT}'s
         * payload, as a class missing at run time would (an {@link OutOfMemoryError} would do the same to the relay, but
         * JUnit aborts the whole run on one).
         */
        @Bean
        EnvelopeCodec envelopeCodec() {
            SimpleModule fatal = new SimpleModule().addSerializer(RawValue.class, new ValueSerializer<RawValue>() {
                @Override
                public void serialize(RawValue value, JsonGenerator generator, SerializationContext context) {
                    String raw = String.valueOf(value.rawValue());
                    if (raw.contains(FATAL_EVENT)) {
                        throw new NoClassDefFoundError("thrown by the test for " + FATAL_EVENT);
                    }
                    generator.writeRawValue(raw);
                }
            });
            return new EnvelopeCodec(
                    EnvelopeCodec.defaultJsonMapper().rebuild().addModule(fatal).build());
        }
    }

    private static final TestRabbit rabbit = TestRabbit.broker();

    /** The service reaches the broker through it: frozen, the broker stops confirming. */
    private static final TcpProxy brokerProxy = TcpProxy.to(rabbit.host(), rabbit.port());

    private static final String OUTPUT = rabbit.topicExchange("refused-out");

    /** An exchange whose only queue is full: every publication to it is refused (nack). */
    private static final String REFUSING = rabbit.topicExchange("refusing");

    private static final String FULL_QUEUE = rabbit.uniqueName("refusing-full");

    private static final String EMITTED = rabbit.uniqueName("refused-emitted");

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    private static final Arrivals arrivals = new Arrivals();

    private static Connection consumer;

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("outboxrefused").registerDataSource(registry);
        rabbit.registerConnection(registry);
        registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
        registry.add("spring.rabbitmq.port", brokerProxy::port);
        registry.add("idempotency.outbox.destination", () -> OUTPUT);
    }

    /** The broker's limit before the tests lowered it. */
    private static String maxMessageSize;

    @BeforeAll
    static void lowerTheBrokersMessageSizeLimit() {
        maxMessageSize = rabbit.control("eval", "application:get_env(rabbit, max_message_size).")
                .replaceAll("[^0-9]", "");
        setMaxMessageSize(Integer.toString(MAX_MESSAGE_SIZE));
    }

    /** Channels opened from now on take it (RabbitMQ 4 reads it from a persistent term, 3.x from the environment). */
    private static void setMaxMessageSize(String bytes) {
        rabbit.control(
                "eval",
                "application:set_env(rabbit, max_message_size, %s), persistent_term:put(max_message_size, %s)."
                        .formatted(bytes, bytes));
    }

    @AfterAll
    static void restoreTheBrokersMessageSizeLimit() {
        setMaxMessageSize(maxMessageSize.isEmpty() ? "134217728" : maxMessageSize);
    }

    @BeforeAll
    static void queues() throws Exception {
        // A publication the broker refuses (406) closes its channel; Spring AMQP's channel cache then throws on a
        // thread of its own ("PublisherCallbackChannel is closed"), which would fail whichever wait is under way.
        Awaitility.doNotCatchUncaughtExceptionsByDefault();
        consumer = rabbit.newConnection();
        Channel channel = consumer.createChannel();
        channel.exchangeDeclare(REFUSING, "topic", true);
        channel.queueDeclare(FULL_QUEUE, true, false, false, Map.of("x-max-length", 0, "x-overflow", "reject-publish"));
        channel.queueBind(FULL_QUEUE, REFUSING, "#");
        channel.queueDeclare(EMITTED, true, false, false, Map.of());
        channel.queueBind(EMITTED, OUTPUT, EMITTED_EVENT);
        channel.basicConsume(EMITTED, true, arrivals.on(channel));
    }

    @AfterAll
    static void closeConsumer() throws Exception {
        Awaitility.reset();
        consumer.close();
        brokerProxy.close();
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    TransactionTemplate transactions;

    @Autowired
    Outbox outbox;

    @Autowired
    OutboxRelay relay;

    @Autowired
    OutboxEndpoint endpoint;

    @Autowired
    @Qualifier("outboxHealthIndicator")
    HealthIndicator health;

    @Autowired
    MeterRegistry meterRegistry;

    @BeforeEach
    void emptyOutbox() {
        this.jdbcTemplate.update("DELETE FROM outbox_event");
        arrivals.clear();
    }

    @Test
    void aRowRefusedMaxAttemptsTimesIsParkedWithItsKeysLaterRowsUntilReleasedOrSkipped() throws Exception {
        List<UUID> written = this.transactions.execute(status -> List.of(
                this.outbox.emit(EMITTED_EVENT, "released", Map.of("n", 1, "padding", OVERSIZED)),
                this.outbox.emit(EMITTED_EVENT, "released", Map.of("n", 2)),
                this.outbox.emit(EMITTED_EVENT, "skipped", Map.of("n", 1, "padding", OVERSIZED)),
                this.outbox.emit(EMITTED_EVENT, "skipped", Map.of("n", 2))));
        UUID released = written.get(0);
        UUID releasedNext = written.get(1);
        UUID skipped = written.get(2);
        UUID skippedNext = written.get(3);

        await().atMost(Duration.ofSeconds(30))
                .alias("both refused rows parked after 2 attempts")
                .until(() -> this.endpoint.status().parked().size() == 2);
        assertThat(this.endpoint.status().parked())
                .extracting(ParkedOutboxEvents.Parked::id, ParkedOutboxEvents.Parked::attempts, Parked::heldBack)
                .containsExactly(tuple(released, 2, 1L), tuple(skipped, 2, 1L));
        assertThat(this.endpoint.status().parked().get(0).lastError()).contains("reply-code=406");
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.OUTBOX_PARKED)
                        .gauge()
                        .value())
                .isEqualTo(2);
        assertThat(this.health.health().getStatus())
                .as("a status of the outbox's own, which keeps every instance in its load balancer")
                .isEqualTo(OutboxHealthIndicator.PARKED);

        assertThat(this.endpoint.act(skipped, "skip").applied()).isTrue();
        await().atMost(Duration.ofSeconds(10))
                .alias("the skipped row's key goes on without it")
                .until(() -> arrivals.received(List.of(skippedNext)));
        assertThat(arrivals.received(List.of(releasedNext)))
                .as("the parked row's key is held back")
                .isFalse();

        // The operator raises the broker's limit, and restarts it: channels take the limit as they open.
        setMaxMessageSize("134217728");
        restartTheBrokersConnections();
        try {
            releaseTheParkedRow(released, releasedNext, skipped);
        } finally {
            setMaxMessageSize(Integer.toString(MAX_MESSAGE_SIZE));
            restartTheBrokersConnections();
        }
    }

    private static void restartTheBrokersConnections() {
        brokerProxy.cut();
        brokerProxy.restore();
    }

    private void releaseTheParkedRow(UUID released, UUID releasedNext, UUID skipped) throws Exception {
        assertThat(this.endpoint.act(released, "release").applied()).isTrue();
        await().atMost(Duration.ofSeconds(10))
                .alias("the released row is published, then its key's next")
                .until(() -> arrivals.received(List.of(releasedNext)));
        // The broker may deliver a row before the relay's run commits its mark.
        await().atMost(Duration.ofSeconds(10))
                .alias("the released row marked published")
                .until(() -> this.jdbcTemplate.queryForObject(
                                "SELECT count(*) FROM outbox_event WHERE id = ? AND published_at IS NOT NULL",
                                Integer.class,
                                released)
                        == 1);
        assertThat(this.endpoint.status().parked()).isEmpty();
        assertThat(this.endpoint.act(skipped, "release").applied())
                .as("a skipped row is not parked any more")
                .isFalse();
        await().atMost(Duration.ofSeconds(10))
                .untilAsserted(
                        () -> assertThat(this.health.health().getStatus()).isEqualTo(Status.UP));
    }

    @Test
    void aKeyHoldingSixHundredRefusedRowsHoldsBackNoOtherKey() {
        this.transactions.executeWithoutResult(status -> this.outbox.write(
                REFUSING,
                IntStream.range(0, 600)
                        .mapToObj(n -> new OutgoingEvent(EMITTED_EVENT, "refused", Map.of("n", n)))
                        .toList()));

        List<UUID> stream = emitStream(100, 50);

        await().atMost(Duration.ofSeconds(30))
                .alias("every event of the other keys is published")
                .until(() -> arrivals.received(stream));
        assertThat(arrivals.commitToArrival(stream, 99))
                .as("commit to arrival, p99, of the other keys' events")
                .isLessThan(Duration.ofSeconds(1));
        assertThat(unpublished("refused")).isEqualTo(600);
    }

    @Test
    void aSkippedEventStaysSkippedThroughARepublicationOfItsPeriod() {
        Instant from = Instant.now().minusSeconds(60);
        List<UUID> written = this.transactions.execute(status -> List.of(
                this.outbox.emit(EMITTED_EVENT, "republished", Map.of("n", 1, "padding", OVERSIZED)),
                this.outbox.emit(EMITTED_EVENT, "republished", Map.of("n", 2))));
        await().atMost(Duration.ofSeconds(30))
                .until(() -> this.endpoint.status().parked().size() == 1);
        assertThat(this.endpoint.act(written.get(0), "skip").applied()).isTrue();
        await().atMost(Duration.ofSeconds(10)).until(() -> arrivals.received(List.of(written.get(1))));
        arrivals.clear();

        int republished = this.transactions.execute(
                status -> this.outbox.republish(from, Instant.now().plusSeconds(60)));

        assertThat(republished)
                .as("the events republished: the skipped one is not")
                .isEqualTo(1);
        await().atMost(Duration.ofSeconds(10))
                .alias("the later event of the key is published again")
                .until(() -> arrivals.received(List.of(written.get(1))) && unpublished() == 0);
        assertThat(this.endpoint.status().parked())
                .as("the skipped event is not parked again")
                .isEmpty();
        assertThat(arrivals.received(List.of(written.get(0)))).isFalse();
    }

    @Test
    void aHotKeyOfAHundredThousandRowsCommittedFirstHoldsBackNoOtherKey() {
        this.jdbcTemplate.update("""
                INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
                SELECT gen_random_uuid(), ?, 'hot', ?, jsonb_build_object('n', n) FROM generate_series(1, 100000) AS n""", OUTPUT, EMITTED_EVENT);

        List<UUID> stream = emitStream(1_000, 100);

        await().atMost(Duration.ofSeconds(60))
                .alias("every event of the other keys is published")
                .until(() -> arrivals.received(stream));
        assertThat(arrivals.commitToArrival(stream, 99))
                .as("commit to arrival, p99, of a thousand keys' events, behind a key of 100,000 rows")
                .isLessThan(Duration.ofSeconds(1));
        assertThat(unpublished("hot")).as("the hot key is still publishing").isPositive();
    }

    @Test
    void keysWhoseRowsOutnumberTheirShareAreDrainedRunAfterRunWithoutWaitingForThePoll() {
        // Three keys of 1,000 rows: a run takes 167 of each, not a full batch, and the next goes at once all the same.
        for (String key : List.of("drained-a", "drained-b", "drained-c")) {
            this.jdbcTemplate.update("""
                    INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
                    SELECT gen_random_uuid(), ?, ?, ?, jsonb_build_object('n', n) FROM generate_series(1, 1000) AS n""", OUTPUT, key, EMITTED_EVENT);
        }

        List<UUID> woken = emitStream(1, 1);

        await().atMost(Duration.ofSeconds(60))
                .alias("every row published, the relay woken by one commit and never polling (poll-interval: 1h)")
                .until(() -> unpublished() == 0);
        assertThat(arrivals.received(woken)).isTrue();
    }

    /** With the relay polling, as it does by default: a poll that finds only a refused row must not slow it down. */
    @Nested
    @TestPropertySource(properties = "idempotency.outbox.relay.poll-interval=200ms")
    class WithARelayThatPolls {

        @Test
        void aRefusedRowDoesNotSlowTheOtherKeysDown() {
            OutboxRefusedRowsOnRabbitIT outer = OutboxRefusedRowsOnRabbitIT.this;
            outer.transactions.executeWithoutResult(status ->
                    outer.outbox.write(REFUSING, List.of(new OutgoingEvent(EMITTED_EVENT, "refused", Map.of("n", 1)))));

            // Between two events, the relay's polls find the refused row alone.
            List<UUID> stream = outer.emitStream(40, 2);

            await().atMost(Duration.ofSeconds(60))
                    .alias("every event of the other keys is published")
                    .until(() -> arrivals.received(stream));
            assertThat(arrivals.commitToArrival(stream, 99))
                    .as("commit to arrival, p99, of the other keys' events, each in a transaction of its own")
                    .isLessThan(Duration.ofSeconds(1));
        }
    }

    @Test
    void aBrokerThatStopsConfirmingHoldsARunForTheConfirmTimeoutOnce() throws Exception {
        // The relay's channels are open and cached before the network goes silent: only confirms are missing then.
        List<UUID> warmUp = emitKeys(100);
        await().atMost(Duration.ofSeconds(30)).until(() -> arrivals.received(warmUp));
        insertWithoutWakingTheRelay(100);

        brokerProxy.freeze();
        long took;
        try {
            long start = System.nanoTime();
            OutboxRelay.Run run = this.relay.publishPending();
            took = System.nanoTime() - start;
            assertThat(run.ran()).isTrue();
            assertThat(run.published()).isZero();
        } finally {
            brokerProxy.thaw();
        }

        assertThat(Duration.ofNanos(took))
                .as("a run of 100 keys against a broker that confirms nothing, with confirm-timeout 1s")
                .isLessThan(Duration.ofMillis(2_500));
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            this.relay.publishPending();
            return unpublished() == 0;
        });
    }

    @Test
    void anErrorOnTheRelaysThreadDoesNotEndTheRelay() {
        this.transactions.executeWithoutResult(
                status -> this.outbox.emit(EMITTED_EVENT, "fatal", Map.of("marker", FATAL_EVENT)));

        List<UUID> later = emitStream(5, 10);

        await().atMost(Duration.ofSeconds(30))
                .alias("events written after the Error are published by the relay's thread")
                .until(() -> arrivals.received(later));
        assertThat(this.relay.isRunning()).isTrue();
    }

    /** Events of distinct keys, each in a transaction of its own, at that rate; returns their ids. */
    private List<UUID> emitStream(int events, int perSecond) {
        List<UUID> ids = new ArrayList<>();
        long interval = TimeUnit.SECONDS.toNanos(1) / perSecond;
        long next = System.nanoTime();
        for (int n = 0; n < events; n++) {
            LockSupport.parkNanos(next - System.nanoTime());
            ids.add(emitTimed("stream-" + n));
            next += interval;
        }
        return ids;
    }

    private List<UUID> emitKeys(int keys) {
        return this.transactions.execute(status -> IntStream.range(0, keys)
                .mapToObj(n -> this.outbox.emit(EMITTED_EVENT, "warm-" + n, Map.of("n", n)))
                .toList());
    }

    /** Emits an event in a transaction of its own, noting when it committed. */
    private UUID emitTimed(String key) {
        return this.transactions.execute(status -> {
            UUID id = this.outbox.emit(EMITTED_EVENT, key, Map.of("key", key));
            TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                @Override
                public void afterCommit() {
                    arrivals.committed(id);
                }
            });
            return id;
        });
    }

    /** Rows of distinct keys, written as the outbox writes them but without waking the relay up. */
    private void insertWithoutWakingTheRelay(int keys) {
        this.jdbcTemplate.batchUpdate(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload) VALUES (?, ?, ?, ?, '{}')",
                IntStream.range(0, keys).boxed().toList(),
                keys,
                (statement, n) -> {
                    statement.setObject(1, UuidV7.generate());
                    statement.setString(2, OUTPUT);
                    statement.setString(3, "silent-" + n);
                    statement.setString(4, EMITTED_EVENT);
                });
    }

    private int unpublished() {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM outbox_event WHERE published_at IS NULL", Integer.class);
    }

    private int unpublished(String key) {
        return this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM outbox_event WHERE published_at IS NULL AND aggregateid = ?", Integer.class, key);
    }

    /** The events that reached the consumer of the output exchange, and when, against when each committed. */
    static final class Arrivals {

        private final Map<UUID, Long> commits = new ConcurrentHashMap<>();

        private final Map<UUID, Long> arrivals = new ConcurrentHashMap<>();

        DefaultConsumer on(Channel channel) {
            return new DefaultConsumer(channel) {
                @Override
                public void handleDelivery(
                        String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
                    arrivals.putIfAbsent(CODEC.decode(body).eventId(), System.nanoTime());
                }
            };
        }

        void clear() {
            this.commits.clear();
            this.arrivals.clear();
        }

        void committed(UUID id) {
            this.commits.put(id, System.nanoTime());
        }

        boolean received(List<UUID> ids) {
            return this.arrivals.keySet().containsAll(ids);
        }

        /** The percentile of the events' times from commit to arrival. */
        Duration commitToArrival(List<UUID> ids, int percentile) {
            List<Long> times = ids.stream()
                    .map(id -> this.arrivals.get(id) - this.commits.get(id))
                    .sorted()
                    .toList();
            int index = Math.max(0, (int) Math.ceil(percentile / 100.0 * times.size()) - 1);
            return Duration.ofNanos(times.get(index));
        }
    }
}
