package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import java.time.Duration;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * On a guarded binding's error channel, after {@link OutageGiveBack}: a message whose last attempt conflicted is held
 * and tried again in place while its {@code max-hold} lasts, then given back, up to {@code max-give-backs} times; then
 * it fails. A message is known again by its body. See docs/operations.md, "Runbook".
 */
public final class ConflictGiveBack implements ChannelInterceptor {

    private static final Logger logger = LoggerFactory.getLogger(ConflictGiveBack.class);

    private record Body(int hash, int length) {}

    private final String bindingName;

    private final int maxGiveBacks;

    private final ConflictHolds holds;

    private final OutageGiveBack giveBack;

    public ConflictGiveBack(String bindingName, IdempotencyProperties.Conflicts settings, OutageGiveBack giveBack) {
        this.giveBack = giveBack;
        this.bindingName = bindingName;
        this.maxGiveBacks = settings.maxGiveBacks();
        this.holds = new ConflictHolds(settings);
    }

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error)
                || !(body(error) instanceof byte[] bytes)
                || !DatabaseOutageClassifier.isConflict(error.getPayload())) {
            return message;
        }
        Body body = new Body(Arrays.hashCode(bytes), bytes.length);
        ErrorMessage conflicted = error;
        while (true) {
            Duration hold = this.holds.next(body);
            if (hold == null) {
                this.holds.forget(body);
                logger.warn(
                        "A message of {} conflicted with other transactions on every attempt of {} tries; it fails as"
                                + " any message does (idempotency.conflicts.max-give-backs={})",
                        this.bindingName,
                        this.maxGiveBacks + 1,
                        this.maxGiveBacks);
                return conflicted;
            }
            logger.debug(
                    "A message of {} conflicted with another transaction on its last attempt; tried again in {} (at"
                            + " most {} times)",
                    this.bindingName,
                    hold,
                    this.maxGiveBacks);
            boolean inPlace = this.giveBack.holdLeft().compareTo(hold) > 0;
            try {
                // Tried again at once, it would conflict again with the transaction that still runs.
                Thread.sleep(hold.toMillis());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                inPlace = false;
            }
            Message<?> after = inPlace ? this.giveBack.tryAgain(conflicted) : null;
            if (after == null) {
                // Past the delivery's max-hold (at once where the binding pauses: Kafka seeks back to the record), or
                // where it cannot be tried in place.
                throw this.giveBack.givenBack(
                        "A conflict with another transaction: the message is given back to be delivered again, not"
                                + " dead-lettered",
                        conflicted.getPayload());
            }
            if (OutageGiveBack.isSettled(after)) {
                this.holds.forget(body);
                return after;
            }
            if (!(after instanceof ErrorMessage next) || !DatabaseOutageClassifier.isConflict(next.getPayload())) {
                return after;
            }
            conflicted = next;
        }
    }

    private static @Nullable Object body(ErrorMessage error) {
        Message<?> original = error.getOriginalMessage();
        if (original == null && error.getPayload() instanceof MessagingException failed) {
            original = failed.getFailedMessage();
        }
        return original != null ? original.getPayload() : null;
    }
}
