package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.TestPropertySource;

/**
 * The same outage on a transactional Kafka binder, whose after-rollback processor counts a record's rolled-back
 * transactions against {@code max-attempts} (3 here) and then dead-letters it: the records given back during the outage
 * are applied once it ends, and each give-back is logged in a line, without a stack trace.
 */
@TestPropertySource(
        properties = {
            "spring.cloud.stream.kafka.binder.transaction.transaction-id-prefix=pause-tx-",
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.key.serializer="
                    + TransactionalKafkaBinder.SERIALIZER,
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.value.serializer="
                    + TransactionalKafkaBinder.SERIALIZER,
            // Given back after 2 s of hold, so that the outage outlasts several give-backs of each record.
            "idempotency.outage.max-hold=2s"
        })
@ExtendWith(OutputCaptureExtension.class)
@Tag("kafka")
class OutagePausesTheBindingOnATransactionalKafkaBinderIT extends OutagePausesTheBindingOnKafkaIT {

    @AfterEach
    void nothingDeadLetteredAndEachGiveBackLoggedWithoutAStackTrace(CapturedOutput output) {
        assertThat(TransactionalKafkaBinder.records(this.kafka, "error." + TOPIC + ".kafka-pause"))
                .as("dead-lettered (to the binder's default dead-letter topic)")
                .isZero();
        TransactionalKafkaBinder.assertGiveBacksLoggedWithoutStackTraces(output);
    }
}
