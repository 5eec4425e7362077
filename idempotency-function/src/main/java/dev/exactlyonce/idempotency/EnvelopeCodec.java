package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.Instants;
import java.lang.reflect.Type;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.springframework.util.Assert;
import tools.jackson.core.JacksonException;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.core.TokenStreamContext;
import tools.jackson.core.TokenStreamLocation;
import tools.jackson.databind.DeserializationContext;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.JavaType;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.deser.jdk.NumberDeserializers;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.module.SimpleModule;
import tools.jackson.databind.node.ObjectNode;
import tools.jackson.databind.util.RawValue;

/**
 * Reads and writes the JSON event envelope, rejecting what is not one with a {@link RejectedMessageException} that
 * names the reason. See docs/reference.md, "The envelope".
 *
 * <p>The default mapper requires every record component, ignores unknown properties, maps decimals to
 * {@link java.math.BigDecimal} exactly and bounds what a message costs to read before it reads it ({@link Limits}).
 */
public final class EnvelopeCodec {

    static final String EVENT_ID = "event_id";
    static final String EVENT_NAME = "event_name";
    static final String OCCURRED_AT = "occurred_at";
    static final String PAYLOAD = "payload";

    private final JsonMapper jsonMapper;

    private final Limits limits;

    public EnvelopeCodec() {
        this(Limits.DEFAULTS);
    }

    public EnvelopeCodec(Limits limits) {
        this(defaultJsonMapper(limits), limits);
    }

    /** A codec with the given mapper: only the default mapper bounds decimals given as strings. */
    public EnvelopeCodec(JsonMapper jsonMapper) {
        this(jsonMapper, Limits.DEFAULTS);
    }

    public EnvelopeCodec(JsonMapper jsonMapper, Limits limits) {
        Assert.notNull(jsonMapper, "jsonMapper must not be null");
        Assert.notNull(limits, "limits must not be null");
        this.jsonMapper = jsonMapper;
        this.limits = limits;
    }

    public static JsonMapper defaultJsonMapper() {
        return defaultJsonMapper(Limits.DEFAULTS);
    }

    /** The mapper described above, refusing {@code BigDecimal} and {@code Number} fields beyond the limits' digits. */
    public static JsonMapper defaultJsonMapper(Limits limits) {
        SimpleModule boundedDecimals = new SimpleModule("idempotency-bounded-decimals");
        boundedDecimals.addDeserializer(BigDecimal.class, new BoundedDecimalDeserializer(limits.maxDecimalDigits()));
        // Jackson's Number deserializer is typed Object: registered for Number as Jackson registers it.
        @SuppressWarnings("unchecked")
        Class<Object> number = (Class<Object>) (Class<?>) Number.class;
        boundedDecimals.addDeserializer(number, new BoundedNumberDeserializer(limits.maxDecimalDigits()));
        return JsonMapper.builder()
                .addModule(boundedDecimals)
                .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
                .enable(DeserializationFeature.FAIL_ON_MISSING_CREATOR_PROPERTIES)
                .enable(DeserializationFeature.FAIL_ON_NULL_CREATOR_PROPERTIES)
                .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
                .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
                .build();
    }

    /** Reads an envelope, leaving its payload as a JSON tree; rejects a body that is not a valid envelope. */
    public EventEnvelope<JsonNode> decode(byte[] body) {
        EventEnvelope<RawPayload> envelope = read(body);
        return new EventEnvelope<>(
                envelope.eventId(), envelope.eventName(), envelope.occurredAt(), tree(envelope.payload()));
    }

    /**
     * Reads an envelope as {@link #decode} does, rejections included, leaving its payload unparsed, so that a discarded
     * copy costs no more than reading its id ({@link #readPayload(RawPayload, Type, String, UUID)} maps it later).
     */
    public EventEnvelope<RawPayload> read(byte[] body) {
        Scan scan = scan(body, "message body", true);
        UUID eventId = parseEventId(requiredText(scan, scan.eventId, EVENT_ID, null));
        scan.refuseNumber(eventId);
        String eventName = requiredText(scan, scan.eventName, EVENT_NAME, eventId);
        if (scan.payload == null || scan.payload.token() == JsonToken.VALUE_NULL) {
            throw missing(PAYLOAD, eventId);
        }
        if (scan.payload.token() != JsonToken.START_OBJECT) {
            throw new RejectedMessageException(
                    Reason.INVALID_PAYLOAD, eventId, "the envelope's payload is not a JSON object");
        }
        return new EventEnvelope<>(
                eventId, eventName, occurredAt(scan, scan.occurredAt, eventId), scan.raw(scan.payload));
    }

    /**
     * Reads a message body that is a bare payload, for messages whose event id and name travel in headers; rejects a
     * body that is not a JSON object, or is beyond the limits.
     */
    public JsonNode decodePayload(byte[] body) {
        return decodePayload(body, null);
    }

    /** Reads a bare payload as {@link #decodePayload(byte[])} does, naming the event id in a rejection. */
    public JsonNode decodePayload(byte[] body, @Nullable UUID eventId) {
        return tree(readBarePayload(body, eventId));
    }

    /** Reads a bare payload as {@link #decodePayload(byte[], UUID)} does, leaving it unparsed. */
    public RawPayload readBarePayload(byte[] body, @Nullable UUID eventId) {
        scan(body, "payload", false).refuseNumber(eventId);
        return new RawPayload(body, 0, body.length);
    }

    /** Maps an envelope's payload to the given type; rejects one that does not map ({@link Reason#INVALID_PAYLOAD}). */
    public <T> T readPayload(EventEnvelope<JsonNode> envelope, Type type) {
        return readPayload(envelope.payload(), type, envelope.eventName(), envelope.eventId());
    }

    /** Maps a payload {@link #read} left unparsed, from its bytes, or rejects it, as the overload for a tree does. */
    public <T> T readPayload(RawPayload payload, Type type, String eventName, @Nullable UUID eventId) {
        JavaType javaType = this.jsonMapper.constructType(type);
        try {
            return this.jsonMapper.readValue(payload.body(), payload.offset(), payload.length(), javaType);
        } catch (JacksonException ex) {
            throw notMapped(ex, javaType, eventName, eventId);
        }
    }

    /** Maps a payload to the given type, or rejects it; the event's name and id only serve the rejection's message. */
    public <T> T readPayload(JsonNode payload, Type type, String eventName, @Nullable UUID eventId) {
        JavaType javaType = this.jsonMapper.constructType(type);
        if (javaType.isTypeOrSubTypeOf(JsonNode.class)) {
            return this.jsonMapper.convertValue(payload, javaType);
        }
        try {
            return this.jsonMapper.treeToValue(payload, javaType);
        } catch (JacksonException ex) {
            throw notMapped(ex, javaType, eventName, eventId);
        }
    }

    private static RejectedMessageException notMapped(
            JacksonException ex, JavaType javaType, String eventName, @Nullable UUID eventId) {
        return new RejectedMessageException(
                Reason.INVALID_PAYLOAD,
                eventId,
                "the payload of %s does not map to %s%s: %s"
                        .formatted(
                                eventName,
                                javaType.getRawClass().getSimpleName(),
                                location(ex),
                                ex.getOriginalMessage()),
                ex);
    }

    /**
     * A payload as it came, {@code length} bytes from {@code offset} of the message body: checked by {@link #read} (a
     * JSON object, its numbers within the limits) but not parsed.
     */
    public record RawPayload(byte[] body, int offset, int length) {

        public RawPayload {
            Objects.checkFromIndexSize(offset, length, body.length);
        }

        /** The payload's JSON text. */
        @Override
        public String toString() {
            return new String(this.body, this.offset, this.length, StandardCharsets.UTF_8);
        }
    }

    private JsonNode tree(RawPayload payload) {
        try {
            return this.jsonMapper.readTree(payload.body(), payload.offset(), payload.length());
        } catch (JacksonException ex) {
            // Read already, token by token; a mapper may still refuse its tree (a name given twice, say).
            throw new RejectedMessageException(
                    Reason.NOT_JSON, null, "the payload is not JSON: %s".formatted(ex.getOriginalMessage()), ex);
        }
    }

    /** Writes an envelope; its payload with the codec's mapper, or as it is when a {@link RawValue} (jsonb text). */
    public byte[] encode(EventEnvelope<?> envelope) {
        ObjectNode root = this.jsonMapper.createObjectNode();
        root.put(EVENT_ID, envelope.eventId().toString());
        root.put(EVENT_NAME, envelope.eventName());
        if (envelope.occurredAt() != null) {
            root.put(OCCURRED_AT, envelope.occurredAt().toString());
        }
        if (envelope.payload() instanceof RawValue raw) {
            root.putRawValue(PAYLOAD, raw);
        } else {
            root.set(PAYLOAD, this.jsonMapper.valueToTree(envelope.payload()));
        }
        return this.jsonMapper.writeValueAsBytes(root);
    }

    /** An outgoing event's payload as a JSON object; throws IllegalArgumentException if it is another JSON value. */
    public ObjectNode writePayload(Object payload) {
        JsonNode tree = this.jsonMapper.valueToTree(payload);
        if (!(tree instanceof ObjectNode object)) {
            throw new IllegalArgumentException(("An event's payload is a JSON object of its fields, and a %s is written"
                            + " as %s: pass a record or a Map")
                    .formatted(payload.getClass().getName(), tree.getNodeType()));
        }
        return object;
    }

    /**
     * Parses a UUID in its canonical 36-character form only, {@code null} for any other text ({@link UUID#fromString}
     * also accepts shortened forms such as {@code 1-2-3-4-5}, which no producer writes).
     */
    public static @Nullable UUID parseCanonicalUuid(String text) {
        if (text.length() != 36) {
            return null;
        }
        for (int i = 0; i < 36; i++) {
            char c = text.charAt(i);
            boolean dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash ? c != '-' : Character.digit(c, 16) < 0) {
                return null;
            }
        }
        return UUID.fromString(text);
    }

    /**
     * Reads a body once, as tokens: one JSON object in UTF-8, within the size limit. It keeps an envelope's fields (the
     * last of a name given twice, as a tree would) and the first number beyond the limits.
     */
    private Scan scan(byte[] body, String what, boolean envelope) {
        if (body.length == 0) {
            throw new RejectedMessageException(Reason.NOT_JSON, null, "the %s is empty".formatted(what));
        }
        if (body.length > this.limits.maxBytes()) {
            throw new RejectedMessageException(
                    Reason.INVALID_PAYLOAD,
                    null,
                    "the %s is %d bytes, over the limit of %d (idempotency.payload.max-size)"
                            .formatted(what, body.length, this.limits.maxBytes()));
        }
        if (utf16OrUtf32(body)) {
            throw new RejectedMessageException(
                    Reason.NOT_JSON,
                    null,
                    "the %s is not UTF-8 (it is UTF-16 or UTF-32): JSON is sent in UTF-8".formatted(what));
        }
        try {
            Scan scan;
            try (JsonParser parser = this.jsonMapper.createParser(body)) {
                scan = scan(parser, new Scan(body, null, envelope ? "" : PAYLOAD), what, envelope);
            }
            if (scan == null) {
                // A mapper that reads bytes as characters (its factory does not canonicalize names, say) tells where
                // a value is in characters only: the body is read as the text it is.
                String text = new String(body, StandardCharsets.UTF_8);
                text = text.startsWith("\uFEFF") ? text.substring(1) : text;
                try (JsonParser parser = this.jsonMapper.createParser(text)) {
                    scan = scan(parser, new Scan(body, text, envelope ? "" : PAYLOAD), what, envelope);
                }
            }
            return Objects.requireNonNull(scan);
        } catch (JacksonException | NumberFormatException ex) {
            String cause = ex instanceof JacksonException jackson ? jackson.getOriginalMessage() : ex.getMessage();
            throw new RejectedMessageException(
                    Reason.NOT_JSON, null, "the %s is not JSON: %s".formatted(what, cause), ex);
        }
    }

    /** The scan of the parser's input; {@code null} when the parser tells no byte offsets of bytes. */
    private @Nullable Scan scan(JsonParser parser, Scan scan, String what, boolean envelope) {
        JsonToken root = parser.nextToken();
        if (root == null) {
            throw new RejectedMessageException(Reason.NOT_JSON, null, "the %s is blank".formatted(what));
        }
        if (scan.text == null && parser.currentTokenLocation().getByteOffset() < 0) {
            return null;
        }
        if (root == JsonToken.START_OBJECT) {
            while (parser.nextToken() == JsonToken.PROPERTY_NAME) {
                String name = parser.currentName();
                JsonToken token = parser.nextToken();
                boolean kept = envelope && isEnvelopeField(name);
                int start = kept ? scan.offset(parser.currentTokenLocation()) : -1;
                String text = kept && token == JsonToken.VALUE_STRING ? parser.getString() : null;
                walk(parser, token, scan);
                if (kept) {
                    Field field = new Field(token, text, start, scan.offset(parser.currentLocation()));
                    switch (name) {
                        case EVENT_ID -> scan.eventId = field;
                        case EVENT_NAME -> scan.eventName = field;
                        case OCCURRED_AT -> scan.occurredAt = field;
                        default -> scan.payload = field;
                    }
                }
            }
        } else {
            walk(parser, root, scan);
        }
        if (this.jsonMapper.isEnabled(DeserializationFeature.FAIL_ON_TRAILING_TOKENS) && parser.nextToken() != null) {
            throw new RejectedMessageException(
                    Reason.NOT_JSON,
                    null,
                    "the %s is not JSON: another value follows the first (%s)".formatted(what, parser.currentToken()));
        }
        if (root != JsonToken.START_OBJECT) {
            throw new RejectedMessageException(
                    Reason.NOT_AN_OBJECT, null, "the %s is JSON but not an object: %s".formatted(what, nodeType(root)));
        }
        return scan;
    }

    private static boolean isEnvelopeField(String name) {
        return switch (name) {
            case EVENT_ID, EVENT_NAME, OCCURRED_AT, PAYLOAD -> true;
            default -> false;
        };
    }

    /** Whether the body starts as UTF-16 or UTF-32, which the parser would read, though JSON is UTF-8 (RFC 8259). */
    private static boolean utf16OrUtf32(byte[] body) {
        if (body.length >= 2
                && ((body[0] == (byte) 0xFE && body[1] == (byte) 0xFF)
                        || (body[0] == (byte) 0xFF && body[1] == (byte) 0xFE))) {
            return true;
        }
        for (int i = 0; i < Math.min(4, body.length); i++) {
            if (body[i] == 0) {
                return true;
            }
        }
        return false;
    }

    private void walk(JsonParser parser, JsonToken token, Scan scan) {
        check(parser, token, scan);
        if (!token.isStructStart()) {
            return;
        }
        int depth = 1;
        while (depth > 0) {
            JsonToken next = parser.nextToken();
            if (next.isStructStart()) {
                depth++;
            } else if (next.isStructEnd()) {
                depth--;
            } else {
                check(parser, next, scan);
            }
        }
    }

    /**
     * Reads every number as a tree would, so that one the parser cannot read fails the body, and keeps the first beyond
     * the limits. {@code NaN} and the infinities cost nothing to convert.
     */
    private void check(JsonParser parser, JsonToken token, Scan scan) {
        BigDecimal value = null;
        if (token == JsonToken.VALUE_NUMBER_FLOAT) {
            if (parser.isNaN()) {
                return;
            }
            value = parser.getDecimalValue();
        } else if (token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
            value = new BigDecimal(parser.getBigIntegerValue());
        }
        if (value != null && scan.refused == null && !this.limits.allowsAnywhere(value)) {
            scan.refused = value;
            scan.refusedAt = path(scan.root, parser.streamReadContext());
        }
    }

    /** Where the parser is, as {@code payload.lines[0].quantity}: worked out for a number refused only. */
    private static String path(String root, TokenStreamContext context) {
        List<String> steps = new ArrayList<>();
        for (TokenStreamContext at = context; at != null && !at.inRoot(); at = at.getParent()) {
            steps.add(at.inArray() ? "[" + at.getCurrentIndex() + "]" : "." + at.currentName());
        }
        StringBuilder path = new StringBuilder(root);
        for (int i = steps.size() - 1; i >= 0; i--) {
            path.append(steps.get(i));
        }
        return path.isEmpty() || path.charAt(0) != '.' ? path.toString() : path.substring(1);
    }

    private static String nodeType(JsonToken token) {
        return switch (token) {
            case START_ARRAY -> "ARRAY";
            case VALUE_STRING -> "STRING";
            case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "NUMBER";
            case VALUE_TRUE, VALUE_FALSE -> "BOOLEAN";
            case VALUE_NULL -> "NULL";
            default -> token.name();
        };
    }

    /** An envelope's field: its first token, its text when a string, and where its value is ({@link Scan#offset}). */
    private record Field(JsonToken token, @Nullable String text, int start, int end) {}

    private final class Scan {

        private final byte[] body;

        /** The body as text, when it was scanned as text: offsets are then of characters, else of bytes. */
        private final @Nullable String text;

        private final String root;

        private @Nullable Field eventId;

        private @Nullable Field eventName;

        private @Nullable Field occurredAt;

        private @Nullable Field payload;

        private @Nullable BigDecimal refused;

        private @Nullable String refusedAt;

        Scan(byte[] body, @Nullable String text, String root) {
            this.body = body;
            this.text = text;
            this.root = root;
        }

        int offset(TokenStreamLocation location) {
            return (int) (this.text == null ? location.getByteOffset() : location.getCharOffset());
        }

        /** The field's value as JSON, as the body has it, for the message of a rejection. */
        String json(Field field) {
            return this.text == null
                    ? new String(this.body, field.start(), field.end() - field.start(), StandardCharsets.UTF_8)
                    : this.text.substring(field.start(), field.end());
        }

        RawPayload raw(Field field) {
            if (this.text == null) {
                return new RawPayload(this.body, field.start(), field.end() - field.start());
            }
            byte[] bytes = json(field).getBytes(StandardCharsets.UTF_8);
            return new RawPayload(bytes, 0, bytes.length);
        }

        void refuseNumber(@Nullable UUID eventId) {
            if (this.refused != null) {
                throw new RejectedMessageException(
                        Reason.INVALID_PAYLOAD,
                        eventId,
                        "%s at %s".formatted(EnvelopeCodec.this.limits.refusal(this.refused), this.refusedAt));
            }
        }
    }

    private static String requiredText(Scan scan, @Nullable Field value, String field, @Nullable UUID eventId) {
        if (value == null || value.token() == JsonToken.VALUE_NULL) {
            throw EVENT_ID.equals(field)
                    ? new RejectedMessageException(Reason.MISSING_EVENT_ID, null, "the envelope has no event_id")
                    : missing(field, eventId);
        }
        String text = value.text();
        if (text == null || text.isBlank()) {
            Reason reason = EVENT_ID.equals(field) ? Reason.INVALID_EVENT_ID : Reason.MISSING_FIELD;
            throw new RejectedMessageException(
                    reason,
                    eventId,
                    "the envelope's %s is not a non-empty string: %s".formatted(field, LogSafe.of(scan.json(value))));
        }
        return text;
    }

    private static UUID parseEventId(String text) {
        UUID eventId = parseCanonicalUuid(text);
        if (eventId == null) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    null,
                    "the envelope's event_id is not a UUID: '%s'".formatted(LogSafe.of(text)));
        }
        return eventId;
    }

    private static @Nullable Instant occurredAt(Scan scan, @Nullable Field value, UUID eventId) {
        if (value == null || value.token() == JsonToken.VALUE_NULL) {
            return null;
        }
        // A string's text; another value (a number, an object) as its JSON, which is no instant either.
        String text = value.text() != null ? value.text() : scan.json(value);
        try {
            return Instants.parse(text);
        } catch (DateTimeParseException ex) {
            throw new RejectedMessageException(
                    Reason.INVALID_OCCURRED_AT,
                    eventId,
                    "the envelope's occurred_at is not an ISO-8601 instant: %s".formatted(LogSafe.of(scan.json(value))),
                    ex);
        }
    }

    private static RejectedMessageException missing(String field, @Nullable UUID eventId) {
        return new RejectedMessageException(Reason.MISSING_FIELD, eventId, "the envelope has no %s".formatted(field));
    }

    private static String location(JacksonException ex) {
        String path = ex.getPath().stream()
                .map(reference -> reference.getPropertyName() != null
                        ? "." + reference.getPropertyName()
                        : "[" + reference.getIndex() + "]")
                .collect(Collectors.joining());
        return path.isEmpty() ? "" : " at payload" + path;
    }

    /**
     * What a message may cost to read: its size in bytes, and the most digits a decimal may have, which is also the
     * largest exponent (of either sign) it may be written with ({@code 1e100} passes 100, {@code 1e101} does not).
     */
    public record Limits(long maxBytes, int maxDecimalDigits) {

        public static final Limits DEFAULTS = new Limits(4L * 1024 * 1024, 100);

        public Limits {
            Assert.isTrue(maxBytes > 0, "maxBytes must be positive");
            Assert.isTrue(maxDecimalDigits > 0, "maxDecimalDigits must be positive");
        }

        boolean allows(BigDecimal value) {
            return value.precision() <= this.maxDecimalDigits
                    && Math.abs((long) value.scale()) <= this.maxDecimalDigits;
        }

        /** A number anywhere in a body: the same digits, an exponent up to ten times as large. */
        boolean allowsAnywhere(BigDecimal value) {
            return value.precision() <= this.maxDecimalDigits
                    && Math.abs((long) value.scale()) <= 10L * this.maxDecimalDigits;
        }

        String refusal(BigDecimal value) {
            return "a decimal of %d digit(s) and scale %d, beyond %d digits or exponent (idempotency.payload.max-decimal-digits)"
                    .formatted(value.precision(), value.scale(), this.maxDecimalDigits);
        }
    }

    /** Jackson's own deserializer of a field typed {@code Number}, whose decimals beyond the limit are refused. */
    private static final class BoundedNumberDeserializer extends NumberDeserializers.NumberDeserializer {

        private final Limits limits;

        BoundedNumberDeserializer(int maxDecimalDigits) {
            this.limits = new Limits(Long.MAX_VALUE, maxDecimalDigits);
        }

        @Override
        public Object deserialize(JsonParser parser, DeserializationContext context) {
            Object value = super.deserialize(parser, context);
            BigDecimal decimal =
                    value instanceof BigDecimal d ? d : value instanceof BigInteger i ? new BigDecimal(i) : null;
            if (decimal != null && !this.limits.allows(decimal)) {
                return context.reportInputMismatch(this, this.limits.refusal(decimal));
            }
            return value;
        }
    }

    /** Jackson's own {@code BigDecimal} deserializer, whose results beyond the limit are refused. */
    private static final class BoundedDecimalDeserializer extends NumberDeserializers.BigDecimalDeserializer {

        private final Limits limits;

        BoundedDecimalDeserializer(int maxDecimalDigits) {
            this.limits = new Limits(Long.MAX_VALUE, maxDecimalDigits);
        }

        @Override
        public BigDecimal deserialize(JsonParser parser, DeserializationContext context) {
            BigDecimal value = super.deserialize(parser, context);
            if (value != null && !this.limits.allows(value)) {
                return context.reportInputMismatch(this, this.limits.refusal(value));
            }
            return value;
        }
    }
}
