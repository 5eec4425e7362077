package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.InterceptableChannel;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The message that tries the database after an outage gives no outcome: an {@link Error} is thrown on its thread where
 * nothing of the library sees it (here by an interceptor of the binding's channel ahead of the library's, as an error
 * of the framework's own code would), so neither its commit nor its failure is reported. The probe waited for that
 * outcome without end, and consumption stayed halted for good, every other message held and given back again and
 * again. The trial now has {@code max-hold} to give an outcome, then counts as failed: another message tries, and
 * consumption resumes.
 */
@SpringBootTest(
        properties = {
            "spring.datasource.hikari.connection-timeout=1000",
            "spring.datasource.hikari.validation-timeout=500",
            "idempotency.outage.probe-initial-interval=200ms",
            "idempotency.outage.probe-max-interval=500ms",
            "idempotency.outage.max-hold=3s",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
// Its @AfterAll closes what the context connects through.
@DirtiesContext
class TrialWithoutOutcomeTests {

    /** An error of the framework's own code, which no catch of the library's sees. */
    static final class InjectedError extends Error {

        private static final long serialVersionUID = 1L;

        InjectedError() {
            super("an error where the library sees none");
        }
    }

    private static final TestDatabase database = TestPostgres.newDatabase("trialwithoutoutcome");

    private static final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry, postgres);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    ConsumptionHalt outage;

    @Autowired
    ApplicationContext context;

    /** Straight to the database, not through the proxy the service uses. */
    private final JdbcTemplate jdbcTemplate =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    @AfterAll
    static void close() {
        postgres.close();
    }

    @Test
    void aTrialThatGivesNoOutcomeDoesNotHaltConsumptionForGood() throws Exception {
        AtomicBoolean armed = new AtomicBoolean(true);
        this.context
                .getBean("idempotencyGuardrecordThing-in-0", InterceptableChannel.class)
                .addInterceptor(0, new ChannelInterceptor() {
                    @Override
                    public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
                        if (armed.getAndSet(false)) {
                            throw new InjectedError();
                        }
                    }
                });
        EventEnvelope<ThingHappened> tried = Things.thingHappened();
        EventEnvelope<ThingHappened> next = Things.thingHappened();
        postgres.cut();
        CompletableFuture<Void> trial = this.deliveries.deliverUntilTakenAsync(tried, Duration.ofSeconds(5));
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
        postgres.restore();
        await().alias("the message that tried the database gone without an outcome")
                .atMost(Duration.ofSeconds(10))
                .until(() -> !armed.get());
        trial.handle((done, failure) -> null).get(10, TimeUnit.SECONDS);

        CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(next, Duration.ofSeconds(60));

        await().alias("consumption resumed").atMost(Duration.ofSeconds(20)).until(() -> this.outage.halt() == null);
        delivery.get(30, TimeUnit.SECONDS);
        assertThat(effects(next)).as("the next message applied once").isEqualTo(1);
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                Integer.class,
                event.payload().thingId());
        return count != null ? count : 0;
    }
}
