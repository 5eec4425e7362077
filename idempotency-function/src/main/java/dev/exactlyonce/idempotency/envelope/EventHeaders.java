package dev.exactlyonce.idempotency.envelope;

/**
 * Names of the message headers that carry the envelope's fields to the business function, which receives the
 * payload alone (declare the function's input as {@code Message<T>} to read them).
 */
public final class EventHeaders {

    /** The event id, a {@link java.util.UUID}. */
    public static final String EVENT_ID = "event_id";

    /** The event name, a {@link String}. */
    public static final String EVENT_NAME = "event_name";

    /** When the event occurred, an {@link java.time.Instant}; absent when the envelope has no {@code occurred_at}. */
    public static final String OCCURRED_AT = "occurred_at";

    private EventHeaders() {}
}
