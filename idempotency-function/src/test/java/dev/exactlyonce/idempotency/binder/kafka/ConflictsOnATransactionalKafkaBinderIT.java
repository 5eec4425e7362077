package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.TestPropertySource;

/**
 * The same conflict on a transactional Kafka binder, where the container runs each record in a Kafka transaction and,
 * once it rolled back, hands the record to the binder's after-rollback processor, which counts the record's failures
 * against {@code max-attempts} and then dead-letters it: the give-backs must not be counted there either, and each is
 * logged in a line, without a stack trace.
 */
@TestPropertySource(
        properties = {
            "spring.cloud.stream.kafka.binder.transaction.transaction-id-prefix=conflicts-tx-",
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.key.serializer="
                    + TransactionalKafkaBinder.SERIALIZER,
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.value.serializer="
                    + TransactionalKafkaBinder.SERIALIZER
        })
@ExtendWith(OutputCaptureExtension.class)
@Tag("kafka")
class ConflictsOnATransactionalKafkaBinderIT extends ConflictsOnKafkaIT {

    @AfterEach
    void nothingDeadLetteredAndEachGiveBackLoggedWithoutAStackTrace(CapturedOutput output) {
        assertThat(TransactionalKafkaBinder.records(this.kafka, DEAD_LETTERS))
                .as("dead-lettered")
                .isZero();
        TransactionalKafkaBinder.assertGiveBacksLoggedWithoutStackTraces(output);
    }
}
