package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.internal.Failures;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * First on a guarded binding's error channel: a message that met an outage is held, tried again in place each time the
 * probe's write passes, and given back past {@code max-hold}. See docs/operations.md, "When things go wrong".
 */
public final class OutageGiveBack implements ChannelInterceptor {

    /** Marks an error message whose delivery was settled in place: the error channel dispatches it to no handler. */
    private static final String SETTLED = "idempotency_settledInPlace";

    private static final Logger logger = LoggerFactory.getLogger(OutageGiveBack.class);

    private final ConsumptionHalt halt;

    private final String bindingName;

    private final @Nullable BinderGiveBack ownGiveBack;

    private final @Nullable MessageChannel input;

    /**
     * @param ownGiveBack the binder's own give-back; {@code null} for one that takes an {@link OutageException}
     * @param input the binding's input channel, for tries in place; {@code null} where none can be {@link #isSettled}
     */
    public OutageGiveBack(
            ConsumptionHalt halt,
            String bindingName,
            @Nullable BinderGiveBack ownGiveBack,
            @Nullable MessageChannel input) {
        this.halt = halt;
        this.bindingName = bindingName;
        this.ownGiveBack = ownGiveBack;
        this.input = input;
    }

    /**
     * @return the message unchanged when not an outage; {@link #isSettled settled} once committed in place; else, tried
     *     in place, an error message of the delivery's own failure (a conflict, a dead letter)
     * @throws RuntimeException the binder's give-back, once the delivery was held {@code max-hold}
     */
    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error) || !this.halt.isOutage(error.getPayload())) {
            return message;
        }
        Throwable failure = error.getPayload();
        this.halt.onOutage(failure);
        Message<?> failed = failedMessage(error);
        while (Failures.find(failure, OutageException.class) == null
                && failed != null
                && this.input != null
                && !this.halt.isStopping()
                // Held what is left of the delivery's max-hold, or until the probe's write goes through.
                && this.halt.awaitAnswer(this.bindingName)) {
            RuntimeException again = runAgain(failed);
            if (again == null) {
                return settled(error);
            }
            if (!this.halt.isOutage(again)) {
                return new ErrorMessage(again, error.getHeaders(), error.getOriginalMessage());
            }
            failure = again;
        }
        String reason =
                "A dependency is unavailable: the message is given back to be delivered again, not" + " dead-lettered";
        this.halt.givenBack();
        this.halt.endDelivery();
        throw givenBack(reason, failure);
    }

    /**
     * For {@link ConflictGiveBack}: the delivery tried again in place, {@link #isSettled settled} once committed; after
     * an outage, what {@link #preSend} makes of it; else the failure's error message; {@code null} where it cannot.
     */
    @Nullable
    Message<?> tryAgain(ErrorMessage error) {
        Message<?> failed = failedMessage(error);
        if (failed == null || this.input == null) {
            return null;
        }
        RuntimeException failure = runAgain(failed);
        if (failure == null) {
            return settled(error);
        }
        ErrorMessage next = new ErrorMessage(failure, error.getHeaders(), error.getOriginalMessage());
        return this.halt.isOutage(failure) ? preSend(next, this.input) : next;
    }

    /** What is left of the hold of the delivery this thread is on: none where the binding pauses. */
    Duration holdLeft() {
        return this.halt.holdLeft(this.bindingName);
    }

    /** Runs the failed message again through the binding's input channel: {@code null} once it committed. */
    private @Nullable RuntimeException runAgain(Message<?> failed) {
        try {
            Objects.requireNonNull(this.input).send(failed);
            logger.debug("A held message of {} committed in place", this.bindingName);
            return null;
        } catch (RuntimeException ex) {
            return ex;
        }
    }

    /** Whether the error message's delivery was settled in place: acknowledged, to no handler of the error channel. */
    public static boolean isSettled(@Nullable Message<?> message) {
        return message != null && Boolean.TRUE.equals(message.getHeaders().get(SETTLED));
    }

    private static ErrorMessage settled(ErrorMessage error) {
        Map<String, Object> headers = new HashMap<>(error.getHeaders());
        headers.put(SETTLED, true);
        return new ErrorMessage(error.getPayload(), headers, error.getOriginalMessage());
    }

    private static @Nullable Message<?> failedMessage(ErrorMessage error) {
        if (error.getPayload() instanceof MessagingException messaging && messaging.getFailedMessage() != null) {
            return messaging.getFailedMessage();
        }
        return error.getOriginalMessage();
    }

    /** The exception that gives a message back to the broker, neither dead-lettered nor skipped. */
    public RuntimeException givenBack(String reason, Throwable failure) {
        return this.ownGiveBack != null
                ? this.ownGiveBack.givenBack(reason, failure)
                : new OutageException(reason, failure);
    }

    /** Whether the library gave the delivery back with an {@link OutageException}, found in the failure's chain. */
    public static boolean isGivenBack(Throwable failure) {
        return Failures.first(failure, cause -> cause instanceof OutageException) != null;
    }
}
