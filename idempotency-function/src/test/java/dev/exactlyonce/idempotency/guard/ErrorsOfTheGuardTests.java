package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventName;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.DeliveryRecorder;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Instant;
import java.util.UUID;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.slf4j.MDC;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import tools.jackson.core.JsonParser;
import tools.jackson.databind.DeserializationContext;
import tools.jackson.databind.ValueDeserializer;
import tools.jackson.databind.annotation.JsonDeserialize;

/**
 * An {@code Error} thrown by the guard itself, not by the business function: mapping a payload needs a class whose
 * static initializer fails, so the first attempt meets a real {@link ExceptionInInitializerError} and the retry a real
 * {@link NoClassDefFoundError}, both out of the guard. Each rolls its claim back, the event is dead-lettered with the
 * error, the thread is left clean, and the next message is processed.
 */
@SpringBootTest(
        classes = ErrorsOfTheGuardTests.Service.class,
        properties = {
            "spring.cloud.function.definition=idempotencyGuard|recordNote",
            "spring.cloud.stream.bindings.idempotencyGuardrecordNote-in-0.destination=notes",
            "spring.cloud.stream.bindings.idempotencyGuardrecordNote-in-0.group=errors",
            "spring.cloud.stream.bindings.idempotencyGuardrecordNote-in-0.consumer.max-attempts=2",
            "spring.cloud.stream.bindings.idempotencyGuardrecordNote-in-0.consumer.back-off-initial-interval=10"
        })
@EnableIdempotencyTestKit
class ErrorsOfTheGuardTests {

    /** What the text of a note is read as: itself, or, for one text, a value of a class that cannot be initialized. */
    static final class Text extends ValueDeserializer<String> {

        static final String NEEDS_THE_BROKEN_CLASS = "needs the broken class";

        @Override
        public String deserialize(JsonParser parser, DeserializationContext context) {
            String text = parser.getString();
            return text.equals(NEEDS_THE_BROKEN_CLASS) ? Broken.VALUE : text;
        }
    }

    /** Its initializer fails: its first use throws ExceptionInInitializerError, each later use NoClassDefFoundError. */
    static final class Broken {

        static final String VALUE = initialValue();

        private static String initialValue() {
            throw new IllegalStateException("the class cannot be initialized (as the test means)");
        }
    }

    @EventName(Note.NAME)
    record Note(
            UUID thingId,
            @JsonDeserialize(using = Text.class) String text) {

        static final String NAME = "test.note.written.v1";
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        @Bean
        Consumer<Note> recordNote(JdbcTemplate jdbcTemplate) {
            return note ->
                    jdbcTemplate.update("INSERT INTO thing_effect (thing_id, amount) VALUES (?, 0)", note.thingId());
        }
    }

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("guarderrors").registerDataSource(registry);
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    DeliveryRecorder recorder;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void anErrorOfTheGuardRollsBackIsRetriedThenDeadLetteredAndTheNextMessageIsProcessed() {
        EventEnvelope<Note> failing = note(Text.NEEDS_THE_BROKEN_CLASS);
        EventEnvelope<Note> next = note("an ordinary note");

        this.deliveries.deliver(failing);

        assertThat(this.recorder.attempts(failing.eventId()))
                .as("the attempt that met the failing initializer, then the retry that met the class left unusable")
                .extracting(attempt -> Failures.find(attempt.failure(), Error.class))
                .satisfiesExactly(
                        first -> assertThat(first).isInstanceOf(ExceptionInInitializerError.class),
                        retry -> assertThat(retry).isInstanceOf(NoClassDefFoundError.class));
        assertThat(this.deliveries.lastError())
                .as("dead-lettered, with the error")
                .isInstanceOfSatisfying(
                        ErrorMessage.class,
                        error -> assertThat(error.getPayload()).hasStackTraceContaining("NoClassDefFoundError"));
        assertThat(this.processedEvents.rows(failing.eventId()))
                .as("no claim left")
                .isZero();
        assertThat(this.probe.invocations("recordNote"))
                .as("the business function never called")
                .isZero();
        assertThat(TransactionSynchronizationManager.isActualTransactionActive())
                .as("no transaction left on the thread")
                .isFalse();
        assertThat(MDC.getCopyOfContextMap())
                .as("no event left in the MDC")
                .satisfiesAnyOf(
                        map -> assertThat(map).isNull(),
                        map -> assertThat(map).doesNotContainKeys("event_id", "event_name"));

        this.deliveries.deliver(next);

        assertThat(this.processedEvents.rows(next.eventId())).isEqualTo(1);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        next.payload().thingId()))
                .isEqualTo(1);
    }

    private static EventEnvelope<Note> note(String text) {
        return new EventEnvelope<>(UUID.randomUUID(), Note.NAME, Instant.now(), new Note(UUID.randomUUID(), text));
    }
}
