package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.internal.BatchMessages;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.cloud.stream.binder.ConsumerProperties;
import org.springframework.core.retry.RetryException;
import org.springframework.core.retry.RetryPolicy;
import org.springframework.core.retry.RetryTemplate;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.integration.StaticMessageHeaderAccessor;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * On the error channel of a guarded batch binding: only the messages that fail on their own are dead-lettered, each
 * with its reason: those the guard rejected ({@link PartlyFailedBatch}), or, for a batch that failed whole, those that
 * fail again one at a time. An outage gives the batch back ({@link OutageGiveBack}). See docs/batch-mode.md.
 */
final class FailedBatchSplitter implements ChannelInterceptor {

    /** Marks the error message of one failed message of a batch, which goes to the binder's handler as it is. */
    private static final String OF_ONE_MESSAGE = "idempotency_failedMessageOfBatch";

    private static final Logger logger = LoggerFactory.getLogger(FailedBatchSplitter.class);

    private final GuardedBinding binding;

    private final MessageChannel input;

    private final ConsumerProperties consumer;

    private final Duration budget;

    private final ConsumptionHalt outage;

    private final OutageGiveBack giveBack;

    /**
     * @param consumer the binding's consumer properties: its attempts, back-off and retryable exceptions apply to each
     *     message processed alone
     * @param budget how long messages may be retried alone, so the consumer thread returns within the broker's clocks
     */
    FailedBatchSplitter(
            GuardedBinding binding,
            MessageChannel input,
            ConsumerProperties consumer,
            Duration budget,
            ConsumptionHalt outage,
            OutageGiveBack giveBack) {
        this.binding = binding;
        this.input = input;
        this.consumer = consumer;
        this.budget = budget;
        this.outage = outage;
        this.giveBack = giveBack;
    }

    /**
     * Sends each failed message's error message to the binder's handler, then hands on the batch's with no raw message
     * left, which the binder acknowledges. A binder that gives no raw message per message dead-letters the batch whole.
     */
    @Override
    public Message<?> preSend(Message<?> message, MessageChannel errorChannel) {
        if (!(message instanceof ErrorMessage error) || error.getHeaders().containsKey(OF_ONE_MESSAGE)) {
            return message;
        }
        Message<?> batch = failedMessage(error);
        Object sourceData = error.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA);
        if (batch == null
                || !(batch.getPayload() instanceof List<?> bodies)
                || !(sourceData instanceof List<?> raw)
                || raw.size() != bodies.size()) {
            return message;
        }
        Throwable failure = error.getPayload();
        PartlyFailedBatch partly = Failures.find(failure, PartlyFailedBatch.class);
        int attemptsLeft = maxAttempts() - attempts(batch);
        Map<Integer, Throwable> failed;
        if (partly != null) {
            failed = partly.failures();
        } else if (bodies.size() > 1) {
            failed = oneAtATime(batch, bodies.size(), failure, maxAttempts());
        } else if (attemptsLeft > 0 && isRetryable(failure)) {
            // A batch of one the binder did not retry (the Kafka binder does not retry batches): its attempts left.
            failed = oneAtATime(batch, 1, failure, attemptsLeft);
        } else {
            return message;
        }
        for (Map.Entry<Integer, Throwable> entry : failed.entrySet()) {
            try {
                errorChannel.send(errorOfOne(error, batch, raw, entry.getKey(), entry.getValue()));
            } catch (RuntimeException ex) {
                // The dead letter was refused or unconfirmed: the batch goes back to the broker whole, not to the DLQ.
                throw this.giveBack.givenBack(
                        ("Could not dead-letter message #%d of a batch of %s; the batch is given back, to be delivered"
                                        + " again")
                                .formatted(entry.getKey(), this.binding.bindingName()),
                        ex);
            }
        }
        Map<String, Object> headers = rawMessagesReplaced(error, raw, List.of());
        PartlyFailedBatch handled =
                partly != null ? partly : new PartlyFailedBatch(this.binding.bindingName(), bodies.size(), failed);
        return new ErrorMessage(new MessagingException(batch, handled), headers, error.getOriginalMessage());
    }

    private Map<Integer, Throwable> oneAtATime(Message<?> batch, int size, Throwable failure, int attempts) {
        logger.warn(
                "A batch of {} message(s) of {} failed as a whole ({}): processing its messages one at a time, so"
                        + " that only those that fail alone are dead-lettered",
                size,
                this.binding.bindingName(),
                Failures.real(failure).toString());
        long deadline = System.nanoTime() + this.budget.toNanos();
        Map<Integer, Throwable> failed = new TreeMap<>();
        for (int index = 0; index < size; index++) {
            Throwable last = attempt(BatchMessages.single(batch, index), System.nanoTime() < deadline ? attempts : 1);
            if (last != null) {
                failed.put(index, last);
            }
        }
        logger.info(
                "Processed the batch of {} one message at a time: {} processed (or copies), {} to the dead-letter"
                        + " queue",
                this.binding.bindingName(),
                size - failed.size(),
                failed.size());
        return failed;
    }

    /**
     * Delivers a batch of one message up to that many times while its failures are retryable, with the binding's
     * back-off; its last failure, if any.
     */
    private @Nullable Throwable attempt(Message<Object> single, int attempts) {
        RetryPolicy policy = RetryPolicy.builder()
                .maxRetries(attempts - 1L)
                .delay(Duration.ofMillis(Math.max(0, this.consumer.getBackOffInitialInterval())))
                .multiplier(Math.max(1.0, this.consumer.getBackOffMultiplier()))
                .maxDelay(Duration.ofMillis(Math.max(1, this.consumer.getBackOffMaxInterval())))
                .predicate(failure -> !(failure instanceof GivenBack) && isRetryable(failure))
                .build();
        AtomicInteger made = new AtomicInteger();
        try {
            new RetryTemplate(policy).execute(() -> {
                made.incrementAndGet();
                return sendOnce(single);
            });
            return null;
        } catch (RetryException ex) {
            Throwable failure = ex.getLastException();
            if (failure instanceof GivenBack givenBack) {
                throw givenBack.getCause();
            }
            if (made.get() < attempts
                    && isRetryable(failure)
                    && Thread.currentThread().isInterrupted()) {
                // The back-off before the next attempt was interrupted: the service stops.
                throw new IdempotencyException("Interrupted while processing a failed batch one message at a time", ex);
            }
            PartlyFailedBatch rejected = Failures.find(failure, PartlyFailedBatch.class);
            return rejected != null ? rejected.failures().values().iterator().next() : Failures.real(failure);
        }
    }

    /** Delivers the message once; an outage holds it in place, or gives the whole batch back ({@link GivenBack}). */
    private @Nullable Void sendOnce(Message<Object> single) throws Throwable {
        try {
            this.input.send(single);
        } catch (RuntimeException ex) {
            if (!this.outage.isOutage(ex)) {
                throw ex;
            }
            Message<?> after;
            try {
                after = this.giveBack.preSend(new ErrorMessage(ex), this.input);
            } catch (RuntimeException givenBack) {
                throw new GivenBack(givenBack);
            }
            if (!OutageGiveBack.isSettled(after)) {
                throw (Throwable) after.getPayload();
            }
        }
        return null;
    }

    /** The batch given back to the broker during an outage, out of the retry of one of its messages. */
    private static final class GivenBack extends RuntimeException {

        GivenBack(RuntimeException givenBack) {
            super(givenBack);
        }

        @Override
        public synchronized RuntimeException getCause() {
            return (RuntimeException) super.getCause();
        }
    }

    /** As the binder's retry classifies it: by the binding's {@code retryable-exceptions}, causes included. */
    private boolean isRetryable(Throwable failure) {
        if (Failures.find(failure, RejectedMessageException.class) != null
                || Failures.find(failure, PartlyFailedBatch.class) != null) {
            return false;
        }
        Map<Class<? extends Throwable>, Boolean> classified = this.consumer.getRetryableExceptions();
        Throwable cause =
                Failures.first(failure, each -> classified.keySet().stream().anyMatch(type -> type.isInstance(each)));
        if (cause == null) {
            return this.consumer.isDefaultRetryable();
        }
        return classified.entrySet().stream()
                .filter(entry -> entry.getKey().isInstance(cause))
                .findFirst()
                .orElseThrow()
                .getValue();
    }

    private int maxAttempts() {
        return Math.max(1, this.consumer.getMaxAttempts());
    }

    private static ErrorMessage errorOfOne(
            ErrorMessage error, Message<?> batch, List<?> raw, int index, Throwable failure) {
        Message<Object> single = BatchMessages.single(batch, index);
        Map<String, Object> headers = rawMessagesReplaced(error, raw, Collections.singletonList(raw.get(index)));
        headers.put(OF_ONE_MESSAGE, index);
        return new ErrorMessage(new MessagingException(single, failure), headers, single);
    }

    /** The error message's headers, with each header that holds the batch's raw messages holding these instead. */
    private static Map<String, Object> rawMessagesReplaced(ErrorMessage error, List<?> raw, List<?> replacement) {
        Map<String, Object> headers = new HashMap<>(error.getHeaders());
        headers.replaceAll((name, value) -> value == raw ? replacement : value);
        return headers;
    }

    /** How many times the binder delivered the batch: its retry counts them in a header; without retry, once. */
    private static int attempts(Message<?> batch) {
        AtomicInteger attempts = StaticMessageHeaderAccessor.getDeliveryAttempt(batch);
        return attempts != null ? Math.max(1, attempts.get()) : 1;
    }

    private static @Nullable Message<?> failedMessage(ErrorMessage error) {
        if (error.getPayload() instanceof MessagingException messaging && messaging.getFailedMessage() != null) {
            return messaging.getFailedMessage();
        }
        return error.getOriginalMessage();
    }
}
