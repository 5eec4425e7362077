package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.internal.BatchMessages;
import java.time.Duration;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.messaging.Message;

/**
 * How long each consumer thread may still hold the delivery it is on during a halt: {@code max-hold} from the
 * delivery's first attempt, which its retries share.
 */
final class DeliveryHold {

    /** The delivery a consumer thread is on (by identity), and when its hold must end, in {@link System#nanoTime()}. */
    private record Delivery(Object key, long deadline) {}

    private final Duration maxHold;

    private final ThreadLocal<Delivery> delivery = new ThreadLocal<>();

    DeliveryHold(Duration maxHold) {
        this.maxHold = maxHold;
    }

    /** Starts the hold at the delivery's first attempt on this thread; its retries (same source or payload) share it. */
    void begin(Message<?> message) {
        if (BatchMessages.isPartOfBatch(message)) {
            // A message of a batch tried alone: the batch's delivery, and its deadline.
            return;
        }
        Object source = message.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA);
        Object key = source != null ? source : message.getPayload();
        Delivery current = this.delivery.get();
        if (current == null || current.key() != key) {
            this.delivery.set(new Delivery(key, System.nanoTime() + this.maxHold.toNanos()));
        }
    }

    /** The delivery ended (committed, or given back): the thread's next message is a new delivery. */
    void end() {
        this.delivery.remove();
    }

    /** What is left of the hold: {@code max-hold} when no delivery began. */
    Duration left() {
        Delivery current = this.delivery.get();
        if (current == null) {
            return this.maxHold;
        }
        return Duration.ofNanos(Math.max(0, current.deadline() - System.nanoTime()));
    }
}
