package dev.exactlyonce.idempotency.internal;

import java.time.Instant;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import tools.jackson.databind.JsonNode;

/**
 * The event a message carries, as the guard reads it.
 *
 * @param eventId the producer's event id; {@code null} only when the message has none and
 *     {@code idempotency.event-id.when-missing} lets it through
 * @param eventName the event's name
 * @param occurredAt when the event occurred, if the message says
 * @param payload the event's fields
 */
public record IncomingEvent(
        @Nullable UUID eventId, String eventName, @Nullable Instant occurredAt, JsonNode payload) {}
