package dev.exactlyonce.idempotency;

import java.util.UUID;
import org.jspecify.annotations.Nullable;

/**
 * A message that can never be processed, whatever the attempts: it goes to the dead-letter queue at once, without
 * retry, and leaves no {@code processed_event} row. The exception's message starts with the {@link Reason}.
 */
public class RejectedMessageException extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    /** Why a message was rejected; also the {@code reason} tag of the rejection meter. */
    public enum Reason {
        /** The body is empty or is not JSON. */
        NOT_JSON,
        /** The body is JSON but not an object. */
        NOT_AN_OBJECT,
        /** The message carries no event id, so it cannot be deduplicated. */
        MISSING_EVENT_ID,
        /** A required envelope field (other than the event id) is missing or null. */
        MISSING_FIELD,
        /** The event id is not a UUID. */
        INVALID_EVENT_ID,
        /** The event name is not a name: it holds characters other than letters, digits, dots, hyphens, underscores. */
        INVALID_EVENT_NAME,
        /** The event name is not the routing key (RabbitMQ) or topic (Kafka) the event arrived by. */
        ROUTE_MISMATCH,
        /** A dead letter moved back to its queue that the service has no record of: nothing vouches for its route. */
        UNRECORDED_DEAD_LETTER,
        /** The envelope's {@code occurred_at} is not an ISO-8601 instant. */
        INVALID_OCCURRED_AT,
        /** The event name is not one the business function handles. */
        UNKNOWN_EVENT,
        /** The payload does not map to the type of the event. */
        INVALID_PAYLOAD
    }

    private final Reason reason;

    private final @Nullable UUID eventId;

    public RejectedMessageException(Reason reason, @Nullable UUID eventId, String message) {
        this(reason, eventId, message, null);
    }

    public RejectedMessageException(Reason reason, @Nullable UUID eventId, String message, @Nullable Throwable cause) {
        // Escaped whole, the cause too: both may quote the message's text, and go into headers, logs and terminals.
        super(reason + ": " + LogSafe.escaped(message), EscapedCause.of(cause, 0));
        this.reason = reason;
        this.eventId = eventId;
    }

    public Reason reason() {
        return this.reason;
    }

    /** The event id, when the message carried a readable one. */
    public @Nullable UUID eventId() {
        return this.eventId;
    }

    /**
     * A rejection's cause, its type and stack trace kept, its message escaped: a parser's message quotes the message's
     * text, and the binder writes the stack trace whole into {@code x-exception-stacktrace}.
     */
    static final class EscapedCause extends RuntimeException {

        private static final long serialVersionUID = 1L;

        private EscapedCause(String message, @Nullable Throwable cause) {
            super(message, cause);
        }

        static @Nullable Throwable of(@Nullable Throwable cause, int depth) {
            if (cause == null || depth > 16) {
                return null;
            }
            String message = cause.getMessage() != null ? ": " + LogSafe.escaped(cause.getMessage()) : "";
            EscapedCause escaped = new EscapedCause(
                    cause.getClass().getName() + message,
                    cause.getCause() != cause ? of(cause.getCause(), depth + 1) : null);
            escaped.setStackTrace(cause.getStackTrace());
            return escaped;
        }

        @Override
        public String toString() {
            // As the cause it stands for printed itself: its type, then its message.
            return String.valueOf(getMessage());
        }
    }
}
