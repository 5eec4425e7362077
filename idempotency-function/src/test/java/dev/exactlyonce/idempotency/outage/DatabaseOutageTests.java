package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.observability.MicrometerIdempotencyMetrics;
import dev.exactlyonce.idempotency.outbox.OutboxRelay;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.amqp.ImmediateRequeueAmqpException;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.context.TestPropertySource;

/**
 * PostgreSQL taken away from the service (a proxy between them is cut) for longer than all the attempts of a message
 * would last: consumption halts, the messages are held rather than retried or dead-lettered, and they are processed
 * once each when the database answers again. The binding allows two attempts, 10 ms apart; a connection is waited
 * for 1 s; a message is held at most 30 s before it is given back (1 s in {@link GivingBack}).
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=30s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through: the context must not stay cached, its threads
// logging failures into later tests.
@DirtiesContext
class DatabaseOutageTests {

    private static final String FUNCTION = "recordThing";

    private static final TestDatabase database = TestPostgres.newDatabase("outage");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @TestConfiguration
    static class Meters {

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    HealthIndicator idempotencyHealthIndicator;

    @Autowired
    MeterRegistry meterRegistry;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.all();

    @AfterEach
    void reset() {
        postgres.restore();
        await().atMost(Duration.ofSeconds(30)).until(() -> this.outage.halt() == null);
        this.probe.reset();
        this.recorder.reset();
        this.deliveries.resetLastError();
    }

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void messagesArrivingWhileTheDatabaseIsAwayAreHeldAndAppliedOnceWhenItAnswers() throws Exception {
        EventEnvelope<ThingHappened> first = Things.thingHappened();
        EventEnvelope<ThingHappened> second = Things.thingHappened();
        double haltsBefore = count(MicrometerIdempotencyMetrics.HALTS);
        postgres.cut();

        CompletableFuture<Void> firstDelivery = this.deliveries.deliverAsync(first);
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        CompletableFuture<Void> secondDelivery = this.deliveries.deliverAsync(second);
        // Longer than both attempts of a message would last (two waits of 1 s for a connection).
        await().during(Duration.ofMillis(2500)).atMost(Duration.ofSeconds(3)).until(() -> !firstDelivery.isDone());
        assertThat(secondDelivery).isNotDone();
        assertThat(this.idempotencyHealthIndicator.health().getStatus()).isEqualTo(Status.OUT_OF_SERVICE);
        postgres.restore();

        firstDelivery.get(30, TimeUnit.SECONDS);
        secondDelivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(first)).isEqualTo(1);
        assertThat(effects(second)).isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
        assertThat(this.recorder.attempts(first.eventId()))
                .as("one attempt: the one that found the database away, held in place until it answered")
                .hasSize(1);
        assertThat(this.recorder.attempts(second.eventId()))
                .as("held before its first attempt")
                .hasSize(1);
        assertThat(this.idempotencyHealthIndicator.health().getStatus()).isEqualTo(Status.UP);
        assertThat(count(MicrometerIdempotencyMetrics.HALTS) - haltsBefore).isEqualTo(1);
        assertThat(this.meterRegistry
                        .get(MicrometerIdempotencyMetrics.HALTED)
                        .timer()
                        .count())
                .isGreaterThanOrEqualTo(1);
        // This test's threads only: its deliveries' (no other test delivers meanwhile) and its context's probe's. The
        // root logger also takes the lines of the other contexts cached in the JVM, whose threads run on.
        List<ILoggingEvent> logged = this.logs.events().stream()
                .filter(log -> log.getThreadName().equals("delivery")
                        || log.getThreadName().equals(this.outage.probeThreadName()))
                .toList();
        assertThat(logged)
                .as("one WARN line when consumption halts, none per message or attempt, no stack trace (the pool's and"
                        + " the outbox relay's own lines aside: the relay says once that its runs fail)")
                .filteredOn(log -> log.getLevel().isGreaterOrEqual(Level.WARN))
                .filteredOn(log -> !log.getLoggerName().startsWith("com.zaxxer.hikari")
                        && !log.getLoggerName().equals(OutboxRelay.class.getName()))
                .singleElement()
                .satisfies(log -> {
                    assertThat(log.getLevel()).isEqualTo(Level.WARN);
                    assertThat(log.getFormattedMessage())
                            .startsWith("Consumption of the guarded bindings [idempotencyGuardrecordThing-in-0] halts");
                    assertThat(log.getThrowableProxy()).isNull();
                });
        assertThat(logged)
                .as("one INFO line when it resumes, with how long it was halted")
                .filteredOn(log -> log.getLoggerName().equals(ConsumptionHalt.class.getName()))
                .filteredOn(log -> log.getLevel() == Level.INFO)
                .singleElement()
                .satisfies(log -> assertThat(log.getFormattedMessage())
                        .startsWith("Consumption of the guarded bindings [idempotencyGuardrecordThing-in-0] resumes"
                                + " after "));
    }

    @Test
    void aServiceStoppedAndStartedAgainWhileHaltedResumesWhenTheDatabaseAnswers() throws Exception {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        postgres.cut();
        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);

        // What a context's stop() and start() do to it.
        this.outage.stop();
        this.outage.start();
        postgres.restore();

        await().atMost(Duration.ofSeconds(10))
                .alias("the halt ends once the database answers")
                .until(() -> this.outage.halt() == null);
        delivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(event)).isEqualTo(1);
    }

    @Test
    void aFailureOfTheMessageWhileTheDatabaseAnswersIsRetriedAndDeadLetteredAsBefore() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();
        this.probe.failNext(FUNCTION, 2);

        this.deliveries.deliver(event);

        assertThat(this.outage.halt()).isNull();
        assertThat(this.recorder.attempts(event.eventId())).hasSize(2);
        assertThat(this.deliveries.lastError()).isNotNull();
        assertThat(effects(event)).isZero();
    }

    @Nested
    @TestPropertySource(properties = "idempotency.outage.max-hold=1s")
    class GivingBack {

        @Test
        void aMessageHeldLongerThanTheMaximumIsGivenBackToBeDeliveredAgainNotDeadLettered() {
            EventEnvelope<ThingHappened> event = Things.thingHappened();
            double givenBack = count(MicrometerIdempotencyMetrics.GIVEN_BACK);
            postgres.cut();

            assertThatThrownBy(() -> DatabaseOutageTests.this.deliveries.deliver(event))
                    .as("given back to the binder: the broker delivers it again")
                    .satisfies(failure -> {
                        assertThat(Failures.find(failure, OutageException.class))
                                .as("given back as the binding's binder (the test binder) takes it")
                                .isNotNull();
                        assertThat(Failures.find(failure, ImmediateRequeueAmqpException.class))
                                .as("not as RabbitMQ's container would, though Spring AMQP is on the class path")
                                .isNull();
                    })
                    .hasStackTraceContaining("A dependency is unavailable: the message is given back");
            assertThat(DatabaseOutageTests.this.deliveries.lastError())
                    .as("not dead-lettered")
                    .isNull();
            assertThat(count(MicrometerIdempotencyMetrics.GIVEN_BACK) - givenBack)
                    .as("the delivery given back, counted")
                    .isEqualTo(1);
            postgres.restore();
            await().atMost(Duration.ofSeconds(10)).until(() -> DatabaseOutageTests.this.outage.halt() == null);

            DatabaseOutageTests.this.deliveries.deliver(event);

            assertThat(effects(event)).isEqualTo(1);
            assertThat(DatabaseOutageTests.this.probe.invocations(FUNCTION)).isEqualTo(1);
        }
    }

    /** A network that drops packets without closing the connection, which pgjdbc would wait on without limit. */
    @Nested
    @TestPropertySource(properties = "idempotency.outage.socket-timeout=2s")
    class WithASilentNetwork {

        @Test
        void aDatabaseThatStopsAnsweringWithoutClosingTheConnectionHaltsConsumptionAndLosesNothing() throws Exception {
            EventEnvelope<ThingHappened> event = Things.thingHappened();
            // The event is claimed; the function's own statement goes out on a network gone silent.
            Pause pause = DatabaseOutageTests.this.probe.pauseNext(FUNCTION);
            CompletableFuture<Void> delivery =
                    DatabaseOutageTests.this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
            pause.awaitReached();
            postgres.freeze();
            try {
                pause.release();

                await().atMost(Duration.ofSeconds(15))
                        .alias("the statement that waits on the silent network fails, and consumption halts")
                        .until(() -> DatabaseOutageTests.this.outage.halt() != null);
                assertThat(delivery).isNotDone();
            } finally {
                postgres.thaw();
            }

            delivery.get(30, TimeUnit.SECONDS);
            assertThat(effects(event)).isEqualTo(1);
            assertThat(DatabaseOutageTests.this.deliveries.lastError())
                    .as("nothing dead-lettered")
                    .isNull();
        }
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }

    private double count(String name) {
        Counter counter = this.meterRegistry.find(name).counter();
        return counter != null ? counter.count() : 0;
    }
}
