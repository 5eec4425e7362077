package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.springframework.test.context.TestPropertySource;

/**
 * The same on a transactional Kafka binder, where a rejected record is dead-lettered by the binder's after-rollback
 * processor, through the binding's error channel, rather than by the binder's retries: the copy is still discarded, and
 * the dead letter still says why it was refused.
 */
@TestPropertySource(
        properties = {
            "spring.cloud.stream.kafka.binder.transaction.transaction-id-prefix=cloudevents-tx-",
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.key.serializer="
                    + TransactionalKafkaBinder.SERIALIZER,
            "spring.cloud.stream.kafka.binder.transaction.producer.configuration.value.serializer="
                    + TransactionalKafkaBinder.SERIALIZER
        })
@Tag("kafka")
class CloudEventsOnATransactionalKafkaBinderIT extends CloudEventsOnAStreamTopicOnKafkaIT {

    /** The refused record is dead-lettered once, and its offset committed: not delivered again. */
    @AfterEach
    void deadLetteredOnce() {
        await().during(Duration.ofSeconds(3))
                .atMost(Duration.ofSeconds(5))
                .untilAsserted(() -> assertThat(TransactionalKafkaBinder.records(this.kafka, DEAD_LETTERS))
                        .isEqualTo(1));
    }
}
