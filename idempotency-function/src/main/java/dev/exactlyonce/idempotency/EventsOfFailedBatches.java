package dev.exactlyonce.idempotency;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.integration.StaticMessageHeaderAccessor;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * On the error channel of a guarded batch binding, where the binder sends a batch it gives up on: a batch is never
 * dead-lettered whole, only the messages that fail on their own are, each with its own reason.
 *
 * <ul>
 *   <li>a batch whose other messages were processed ({@link FailedEventsOfBatch}: messages the guard rejected) has
 *       its failed messages dead-lettered, one error message each;
 *   <li>a batch that failed as a whole after its attempts (the business function threw) has its messages processed
 *       again one at a time, each in a transaction of its own through the binding's input channel, with up to the
 *       binding's {@code max-attempts} attempts each; those that still fail are dead-lettered, one error message
 *       each. A batch of one message gets the attempts the binder did not make (the Kafka binder does not retry
 *       batches). A message that fails because a dependency is unavailable stops this and gives the batch back
 *       ({@link OutageGiveBack}): the events processed so far are copies when it comes again.
 * </ul>
 *
 * <p>The error message of one failed message is the batch's, cut to that message: its raw message (the binders' header
 * {@code sourceData}, a list of one) and its failure. The binder's own dead-letter handler then publishes it as it
 * publishes any batch, with its reason ({@code x-exception-message} on RabbitMQ, on Kafka the exception headers).
 * Once they are all sent, the batch's own error message goes on with no raw message left, so the binder dead-letters
 * nothing more and the batch is acknowledged.
 */
final class EventsOfFailedBatches implements ChannelInterceptor {

    /** Marks the error message of one failed message of a batch, which goes to the binder's handler as it is. */
    private static final String OF_ONE_MESSAGE = "idempotency_failedMessageOfBatch";

    private static final Logger logger = LoggerFactory.getLogger(EventsOfFailedBatches.class);

    private final GuardedBinding binding;

    private final MessageChannel input;

    private final int maxAttempts;

    private final Duration backOff;

    private final Outage outage;

    private final OutageGiveBack giveBack;

    EventsOfFailedBatches(
            GuardedBinding binding,
            MessageChannel input,
            int maxAttempts,
            Duration backOff,
            Outage outage,
            OutageGiveBack giveBack) {
        this.binding = binding;
        this.input = input;
        this.maxAttempts = Math.max(1, maxAttempts);
        this.backOff = backOff;
        this.outage = outage;
        this.giveBack = giveBack;
    }

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
        FailedEventsOfBatch partly = Failures.find(failure, FailedEventsOfBatch.class);
        Map<Integer, Throwable> failed;
        int attempted = attempts(batch);
        if (partly != null) {
            failed = partly.failures();
        } else if (bodies.size() > 1) {
            failed = oneAtATime(batch, bodies.size(), failure, this.maxAttempts);
        } else if (attempted < this.maxAttempts && Failures.find(failure, RejectedMessageException.class) == null) {
            // A batch of one the binder did not retry (the Kafka binder does not retry batches): its attempts left.
            failed = oneAtATime(batch, 1, failure, this.maxAttempts - attempted);
        } else {
            return message;
        }
        for (Map.Entry<Integer, Throwable> entry : failed.entrySet()) {
            errorChannel.send(errorOfOne(error, batch, raw, entry.getKey(), entry.getValue()));
        }
        Map<String, Object> headers = rawMessagesReplaced(error, raw, List.of());
        FailedEventsOfBatch handled =
                partly != null ? partly : new FailedEventsOfBatch(this.binding.bindingName(), bodies.size(), failed);
        return new ErrorMessage(new MessagingException(batch, handled), headers, error.getOriginalMessage());
    }

    private Map<Integer, Throwable> oneAtATime(Message<?> batch, int size, Throwable failure, int attempts) {
        logger.warn(
                "A batch of {} message(s) of {} failed as a whole ({}): processing its messages one at a time, so"
                        + " that only those that fail alone are dead-lettered",
                size,
                this.binding.bindingName(),
                Failures.real(failure).toString());
        Map<Integer, Throwable> failed = new TreeMap<>();
        for (int index = 0; index < size; index++) {
            Throwable last = attempt(BatchMessages.single(batch, index), attempts);
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

    /** Delivers a batch of one message to the binding again, up to that many times; its last failure, if any. */
    private @Nullable Throwable attempt(Message<Object> single, int attempts) {
        Throwable last = null;
        for (int attempt = 1; attempt <= attempts; attempt++) {
            try {
                this.input.send(single);
                return null;
            } catch (RuntimeException ex) {
                if (this.outage.isOutage(ex)) {
                    // Throws: the batch is given back, to come again once the dependency is there.
                    this.giveBack.preSend(new ErrorMessage(ex), this.input);
                }
                FailedEventsOfBatch rejected = Failures.find(ex, FailedEventsOfBatch.class);
                if (rejected != null) {
                    return rejected.failures().values().iterator().next();
                }
                last = Failures.real(ex);
                if (last instanceof RejectedMessageException) {
                    return last;
                }
            }
            if (attempt < attempts) {
                pause();
            }
        }
        return last;
    }

    private void pause() {
        try {
            Thread.sleep(this.backOff.toMillis());
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IdempotencyException("Interrupted while processing a failed batch one message at a time", ex);
        }
    }

    private static ErrorMessage errorOfOne(
            ErrorMessage error, Message<?> batch, List<?> raw, int index, Throwable failure) {
        Message<Object> single = BatchMessages.single(batch, index);
        Map<String, Object> headers = rawMessagesReplaced(error, raw, List.of(raw.get(index)));
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
