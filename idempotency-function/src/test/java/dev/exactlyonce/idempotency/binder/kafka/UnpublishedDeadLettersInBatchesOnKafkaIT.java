package dev.exactlyonce.idempotency.binder.kafka;

import org.junit.jupiter.api.Tag;
import org.springframework.test.context.TestPropertySource;

/**
 * The same on a batch binding: the batch is given back whole while the dead letter of its rejected record cannot be
 * published, after a growing back-off, each time said at WARN; then the record is dead-lettered. The batch's other
 * records are applied with it the first time, and discarded as copies after.
 */
@TestPropertySource(
        properties = "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.batch-mode=true")
@Tag("kafka")
class UnpublishedDeadLettersInBatchesOnKafkaIT extends UnpublishedDeadLettersOnKafkaIT {

    @Override
    boolean batches() {
        return true;
    }
}
