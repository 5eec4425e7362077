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
 * On a guarded binding's error channel, after {@link OutageGiveBack}: a message whose last attempt failed on a conflict
 * with another transaction (a serialization failure, a deadlock, a lock or statement timeout:
 * {@link DatabaseOutageClassifier#isConflict}) did nothing wrong, and the binder's attempts are not spent on it. It is
 * held a while ({@code idempotency.conflicts.first-hold}, 200 ms, doubling up to {@code longest-hold}, 5 s) and tried
 * again, up to {@code idempotency.conflicts.max-give-backs} times (once each in place; with all its attempts when given
 * back); after that it fails as any message does, so that one that always conflicts (a statement that always times
 * out) still reaches the dead-letter queue. It is tried again in place, on the consumer thread that holds it, for as
 * long as the delivery's {@code max-hold} lasts, and given back to the broker only past it (at once where the binding
 * pauses: Kafka seeks back to the record): a broker that counts each return (RabbitMQ's quorum queues) sees none for a
 * storm of conflicts shorter than {@code max-hold}.
 *
 * <p>A message is known again by its body: a broker redelivers the same bytes ({@link ConflictHolds}). A batch is not
 * given back here: its events are tried one by one ({@code FailedBatchSplitter} of the guard).
 */
public final class ConflictGiveBack implements ChannelInterceptor {

    private static final Logger logger = LoggerFactory.getLogger(ConflictGiveBack.class);

    private record Body(int hash, int length) {}

    private final String bindingName;

    private final int maxGiveBacks;

    private final ConflictHolds holds;

    private final OutageGiveBack giveBack;

    /**
     * @param giveBack how the binding gives a delivery back to its binder
     */
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
                // The back-off, on the consumer thread that holds the message (as an outage's hold does): tried again
                // at once, it would conflict again with the transaction that still runs.
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
