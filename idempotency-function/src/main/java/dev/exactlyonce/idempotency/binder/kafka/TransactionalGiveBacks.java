package dev.exactlyonce.idempotency.binder.kafka;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.outage.ConflictHolds;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.DatabaseOutageClassifier;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.core.log.LogAccessor;
import org.springframework.kafka.KafkaException;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.ListenerExecutionFailedException;
import org.springframework.kafka.listener.ListenerUtils;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.listener.SeekUtils;

/**
 * The error handler of a guarded single-record binding on a transactional Kafka binder, deciding give-backs in the
 * record's transaction: the error channel hears of a failure only after {@code max-attempts} rollbacks. An outage is
 * given back every second without limit, a conflict after a hold, up to {@code max-give-backs} times; any other failure
 * is left to the binder's after-rollback processor. See docs/reference.md, "Swapping binders".
 */
final class TransactionalGiveBacks implements CommonErrorHandler {

    private static final LogAccessor logger = new LogAccessor(TransactionalGiveBacks.class);

    private static final Duration OUTAGE_HOLD = Duration.ofSeconds(1);

    private final ConsumptionHalt outage;

    private final IdempotencyProperties.Conflicts conflicts;

    /** Kept past the limit: else each attempt the after-rollback processor counts would start the give-backs again. */
    private final ConflictHolds holds;

    TransactionalGiveBacks(ConsumptionHalt outage, IdempotencyProperties.Conflicts conflicts) {
        this.outage = outage;
        this.conflicts = conflicts;
        this.holds = new ConflictHolds(conflicts);
    }

    @Override
    public boolean seeksAfterHandling() {
        return true;
    }

    /** A record given back is sought back to here; any other is left to the after-rollback processor. */
    @Override
    public void handleRemaining(
            Exception thrown,
            List<ConsumerRecord<?, ?>> records,
            Consumer<?, ?> consumer,
            MessageListenerContainer container) {
        RuntimeException end = end(thrown, records.get(0), container);
        SeekUtils.doSeeks(
                end instanceof GivenBack ? records : records.subList(1, records.size()),
                consumer,
                thrown,
                false,
                (record, failure) -> false,
                logger);
        if (end instanceof GivenBack givenBack) {
            givenBacksFirst(container);
            try {
                // On the consumer thread, as the binder's back-off would: at once, it would fail the same way.
                ListenerUtils.stoppableSleep(container, givenBack.hold.toMillis());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
        }
        throw end;
    }

    private RuntimeException end(Exception thrown, ConsumerRecord<?, ?> record, MessageListenerContainer container) {
        String cause = Failures.root(thrown).toString();
        if (this.outage.isOutage(thrown) || OutageGiveBack.isGivenBack(thrown)) {
            return new GivenBack(
                    "A dependency is unavailable (%s): given back to be delivered again".formatted(cause), OUTAGE_HOLD);
        }
        if (!DatabaseOutageClassifier.isConflict(thrown)) {
            return new OwnFailure(thrown);
        }
        Duration hold = this.holds.next(
                container.getGroupId() + " " + record.topic() + "-" + record.partition() + "@" + record.offset());
        if (hold != null) {
            return new GivenBack(
                    "A conflict with another transaction (%s): given back to be delivered again in %s (at most %d times)"
                            .formatted(cause, hold, this.conflicts.maxGiveBacks()),
                    hold);
        }
        logger.warn(() -> ("A record of group %s conflicted with other transactions on every attempt of %d tries; it"
                        + " fails as any record does (idempotency.conflicts.max-give-backs=%d)")
                .formatted(container.getGroupId(), this.conflicts.maxGiveBacks() + 1, this.conflicts.maxGiveBacks()));
        // Its cause told, not chained: on the error channel, a conflict would be given back again.
        return new KafkaException(
                "A conflict with another transaction on each of %d tries: %s"
                        .formatted(this.conflicts.maxGiveBacks() + 1, cause),
                KafkaException.Level.DEBUG,
                null);
    }

    /**
     * Puts {@link GivenBacksFirst} before the binder's after-rollback processor, here on the consumer thread: the
     * binder makes the container and calls no hook of the library's with it.
     */
    private static void givenBacksFirst(MessageListenerContainer container) {
        List<MessageListenerContainer> containers = new ArrayList<>(List.of(container));
        if (container instanceof ConcurrentMessageListenerContainer<?, ?> concurrent) {
            containers.addAll(concurrent.getContainers());
        }
        for (MessageListenerContainer each : containers) {
            if (each instanceof AbstractMessageListenerContainer<?, ?> listeners
                    && !(listeners.getAfterRollbackProcessor() instanceof GivenBacksFirst<?, ?>)) {
                putFirst(listeners);
            }
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    private static void putFirst(AbstractMessageListenerContainer listeners) {
        listeners.setAfterRollbackProcessor(new GivenBacksFirst<>(listeners.getAfterRollbackProcessor()));
    }

    /** Ends the transaction of a record given back: its text says why, and it has no stack trace to log. */
    static final class GivenBack extends KafkaException {

        private final transient Duration hold;

        GivenBack(String message, Duration hold) {
            super(message, Level.DEBUG, null);
            this.hold = hold;
        }

        @Override
        public synchronized Throwable fillInStackTrace() {
            return this;
        }
    }

    /** Ends the transaction of a record that failed for a reason of its own, the failure as its cause (unwrapped). */
    static final class OwnFailure extends KafkaException implements Failures.Wrapper {

        OwnFailure(Exception thrown) {
            super(
                    "A failure of the record's own",
                    Level.DEBUG,
                    Failures.real(
                            thrown instanceof ListenerExecutionFailedException listener && listener.getCause() != null
                                    ? listener.getCause()
                                    : thrown));
        }
    }

    /** Hands the binder's after-rollback processor every rolled-back record but one given back (already sought). */
    private record GivenBacksFirst<K, V>(AfterRollbackProcessor<K, V> binders) implements AfterRollbackProcessor<K, V> {

        @Override
        public void process(
                List<ConsumerRecord<K, V>> records,
                Consumer<K, V> consumer,
                MessageListenerContainer container,
                Exception exception,
                boolean recoverable,
                ContainerProperties.EOSMode eosMode) {
            if (!(exception instanceof GivenBack)) {
                this.binders.process(records, consumer, container, exception, recoverable, eosMode);
            }
        }

        @Override
        public void clearThreadState() {
            this.binders.clearThreadState();
        }

        @Override
        public boolean isProcessInTransaction() {
            return this.binders.isProcessInTransaction();
        }
    }
}
