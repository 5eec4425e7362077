package dev.exactlyonce.idempotency;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.IdempotencyProperties.EventId;
import dev.exactlyonce.idempotency.IdempotencyProperties.EventIdSource;
import dev.exactlyonce.idempotency.IdempotencyProperties.MissingEventId;
import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.messaging.MessageHeaders;
import org.springframework.util.ClassUtils;
import tools.jackson.databind.JsonNode;

/**
 * Reads the event a message carries, from the envelope or, per {@code idempotency.event-id.source}, from headers
 * around a bare payload. Header values that arrive as bytes (as on Kafka) are read as UTF-8.
 */
final class EventReader {

    static final String AMQP_MESSAGE_ID = "amqp_messageId";

    static final String AMQP_ROUTING_KEY = "amqp_receivedRoutingKey";

    static final String AMQP_EXCHANGE = "amqp_receivedExchange";

    static final String KAFKA_TOPIC = "kafka_receivedTopic";

    static final String AMQP_CONSUMER_QUEUE = "amqp_consumerQueue";

    /** The message a binder received, as it received it (Spring Integration's {@code sourceData}). */
    static final String SOURCE_DATA = "sourceData";

    private static final boolean AMQP =
            ClassUtils.isPresent("org.springframework.amqp.core.Message", EventReader.class.getClassLoader());

    /**
     * The suffix of a queue's replay exchange, {@code <queue>.replay}: a direct exchange bound to the queue and its
     * dead-letter queue only, that dead letters are moved back through by a user that may write nothing else.
     */
    static final String REPLAY_EXCHANGE_SUFFIX = ".replay";

    /** What an event name may hold: it goes into log lines, the MDC and meters' tags, so nothing else. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,254}");

    /**
     * The prefixes of CloudEvents attributes in binary mode: Kafka's, HTTP's, AMQP's (and AMQP's as some mappers write
     * it). Read here rather than with Spring Cloud Function's {@code CloudEventMessageUtils} (5.0): it picks one prefix
     * per message by casting the {@code specversion} header to a String, which fails on Kafka, where header values
     * arrive as bytes, and its {@code getTime} reads a String only.
     */
    private static final List<String> CLOUDEVENTS_PREFIXES = List.of("ce_", "ce-", "cloudEvents:", "cloudEvents_");

    private final EnvelopeCodec codec;

    private final EventId settings;

    EventReader(EnvelopeCodec codec, EventId settings) {
        this.codec = codec;
        this.settings = settings;
    }

    /**
     * Whether events are read from the message's own headers: from every source but the envelope, and to check the
     * name against the route the message arrived by (in a batch, each message's own).
     */
    boolean readsHeaders() {
        return this.settings.source() != EventIdSource.ENVELOPE || this.settings.routeCheck();
    }

    IncomingEvent read(MessageHeaders headers, byte[] body) {
        IncomingEvent event = readEvent(headers, body);
        if (!NAME.matcher(event.eventName()).matches()) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_NAME,
                    event.eventId(),
                    ("the event name '%s' holds characters other than letters, digits, '.', '-' and '_', or is longer"
                                    + " than 255")
                            .formatted(Printable.of(event.eventName())));
        }
        if (this.settings.routeCheck()) {
            String route = route(headers);
            if (route != null && !route.equals(event.eventName())) {
                throw new RejectedMessageException(
                        Reason.ROUTE_MISMATCH,
                        event.eventId(),
                        ("the event's name, %s, is not the routing key or topic it arrived by, '%s': an event is"
                                        + " published under its own name (idempotency.event-id.route-check)")
                                .formatted(event.eventName(), Printable.of(route)));
            }
        }
        return event;
    }

    private IncomingEvent readEvent(MessageHeaders headers, byte[] body) {
        if (this.settings.source() == EventIdSource.ENVELOPE) {
            EventEnvelope<JsonNode> envelope = this.codec.decode(body);
            return new IncomingEvent(
                    envelope.eventId(), envelope.eventName(), envelope.occurredAt(), envelope.payload());
        }
        UUID eventId = eventId(headers);
        boolean cloudEvent = this.settings.source() == EventIdSource.CLOUDEVENTS;
        String eventName = cloudEvent ? cloudEventHeader(headers, "type") : text(headers, EventHeaders.EVENT_NAME);
        if (eventName == null && !cloudEvent) {
            eventName = amqpRoute(headers);
        }
        if (eventName == null || eventName.isBlank()) {
            throw new RejectedMessageException(
                    Reason.MISSING_FIELD,
                    eventId,
                    cloudEvent
                            ? "the message has no ce_type header"
                            : "the message has no event_name header and no routing key");
        }
        String time = cloudEvent ? cloudEventHeader(headers, "time") : text(headers, EventHeaders.OCCURRED_AT);
        return new IncomingEvent(
                eventId, eventName, occurredAt(time, eventId), this.codec.decodePayload(body, eventId));
    }

    private @Nullable UUID eventId(MessageHeaders headers) {
        String text = switch (this.settings.source()) {
            case HEADER -> text(headers, this.settings.header());
            case MESSAGE_ID -> text(headers, AMQP_MESSAGE_ID);
            case CLOUDEVENTS -> cloudEventHeader(headers, "id");
            case ENVELOPE -> throw new IllegalStateException("the envelope carries its own id");
        };
        if (text == null || text.isBlank()) {
            if (this.settings.whenMissing() == MissingEventId.PASS_THROUGH) {
                return null;
            }
            throw new RejectedMessageException(
                    Reason.MISSING_EVENT_ID, null, "the message has no event id (%s)".formatted(describeSource()));
        }
        UUID eventId = EnvelopeCodec.parseCanonicalUuid(text.trim());
        if (eventId == null) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    null,
                    "the message's event id (%s) is not a UUID: '%s'".formatted(describeSource(), Printable.of(text)));
        }
        return eventId;
    }

    private String describeSource() {
        return switch (this.settings.source()) {
            case HEADER -> "header " + this.settings.header();
            case MESSAGE_ID -> "AMQP message_id";
            case CLOUDEVENTS -> "header ce_id";
            case ENVELOPE -> "envelope event_id";
        };
    }

    /**
     * What the event was routed by: on RabbitMQ the routing key it was published with, on Kafka its topic; nothing
     * where the binder says neither (the test binder).
     */
    private static @Nullable String route(MessageHeaders headers) {
        String routingKey = amqpRoute(headers);
        return routingKey != null ? routingKey : text(headers, KAFKA_TOPIC);
    }

    /** The routing key a RabbitMQ message was published with, or {@code null} for a message of another binder. */
    private static @Nullable String amqpRoute(MessageHeaders headers) {
        Object source = headers.get(SOURCE_DATA);
        if (AMQP && RabbitSource.is(source)) {
            return RabbitSource.publishedRoutingKey(source);
        }
        if (!headers.containsKey(AMQP_ROUTING_KEY)) {
            return null;
        }
        // Without the received message (a binder that does not hand it on): the mapped headers, the best there is.
        return publishedRoutingKey(
                text(headers, AMQP_EXCHANGE),
                text(headers, AMQP_ROUTING_KEY),
                text(headers, AMQP_CONSUMER_QUEUE),
                headers);
    }

    /**
     * The routing key the event was published with. A message that arrives through the default exchange, or through
     * its queue's replay exchange ({@code <queue>.replay}), was sent to its queue directly (a dead letter moved back
     * to its queue), with the queue's name as routing key: the event's routing key is then the one recorded when it
     * was dead-lettered ({@link EventHeaders#deadLetteredRoutingKey}). Whoever may write to those exchanges may put
     * any event into the queue: give that right to the replay's user alone.
     */
    private static @Nullable String publishedRoutingKey(
            @Nullable String exchange, @Nullable String routingKey, @Nullable String queue, Map<String, ?> headers) {
        boolean replayed = queue != null && exchange != null && exchange.equals(queue + REPLAY_EXCHANGE_SUFFIX);
        if (!replayed && !"".equals(exchange)) {
            return routingKey;
        }
        // Through the replay exchange, only the replay's user publishes: what it recorded of a dead letter it moved.
        String first = replayed ? text(headers.get(EventHeaders.REPLAYED_ROUTING_KEY)) : null;
        if (first != null) {
            return first;
        }
        String recorded = EventHeaders.deadLetteredRoutingKey(headers);
        return recorded != null ? recorded : routingKey;
    }

    /**
     * The route of a RabbitMQ message as the broker gave it: the binder hands on the message it received
     * ({@code sourceData}), whose properties the publisher cannot set. Its mapped headers are not to be trusted for
     * this: a header the publisher named {@code amqp_receivedRoutingKey} (or {@code amqp_receivedExchange},
     * {@code amqp_consumerQueue}) replaces the broker's value among them. Loaded only when Spring AMQP is there.
     */
    private static final class RabbitSource {

        static boolean is(@Nullable Object source) {
            return source instanceof org.springframework.amqp.core.Message;
        }

        static @Nullable String publishedRoutingKey(Object source) {
            org.springframework.amqp.core.MessageProperties properties =
                    ((org.springframework.amqp.core.Message) source).getMessageProperties();
            return EventReader.publishedRoutingKey(
                    properties.getReceivedExchange(),
                    properties.getReceivedRoutingKey(),
                    properties.getConsumerQueue(),
                    properties.getHeaders());
        }
    }

    private static @Nullable String cloudEventHeader(MessageHeaders headers, String attribute) {
        for (String prefix : CLOUDEVENTS_PREFIXES) {
            String value = text(headers, prefix + attribute);
            if (value != null) {
                return value;
            }
        }
        return null;
    }

    private static @Nullable String text(MessageHeaders headers, String name) {
        return text(headers.get(name));
    }

    /** A header's value as text: bytes (as on Kafka) read as UTF-8. */
    private static @Nullable String text(@Nullable Object value) {
        if (value instanceof byte[] bytes) {
            return new String(bytes, UTF_8);
        }
        return value != null ? value.toString() : null;
    }

    private static @Nullable Instant occurredAt(@Nullable String time, @Nullable UUID eventId) {
        if (time == null) {
            return null;
        }
        try {
            return Instants.parse(time);
        } catch (DateTimeParseException ex) {
            throw new RejectedMessageException(
                    Reason.INVALID_OCCURRED_AT,
                    eventId,
                    "the event time is not an ISO-8601 instant: " + Printable.of(time),
                    ex);
        }
    }
}
