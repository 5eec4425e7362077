package dev.exactlyonce.idempotency.envelope;

import java.time.Instant;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.util.Assert;

/**
 * What a producer publishes: the event id it set when it wrote its outbox row (never one generated on receipt), the
 * event name (also the routing key), when the event occurred if it said so, and the event's own fields. See
 * docs/reference.md, "The envelope".
 *
 * @param <T> the type of the payload
 */
public record EventEnvelope<T>(
        UUID eventId, String eventName, @Nullable Instant occurredAt, T payload) {

    private static final int NAME_MAX_LENGTH = 255;

    public EventEnvelope {
        Assert.notNull(eventId, "eventId must not be null");
        Assert.hasText(eventName, "eventName must not be empty");
        Assert.notNull(payload, "payload must not be null");
    }

    /**
     * Whether it is a name fit for log lines, the MDC and meters' tags: a letter or digit, then letters, digits,
     * {@code .}, {@code _} and {@code -}, 255 in all. Checked by hand, not by a regular expression: every message is.
     */
    public static boolean isEventName(String name) {
        int length = name.length();
        if (length == 0 || length > NAME_MAX_LENGTH) {
            return false;
        }
        for (int i = 0; i < length; i++) {
            char c = name.charAt(i);
            boolean letterOrDigit = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            if (!letterOrDigit && (i == 0 || (c != '.' && c != '_' && c != '-'))) {
                return false;
            }
        }
        return true;
    }
}
