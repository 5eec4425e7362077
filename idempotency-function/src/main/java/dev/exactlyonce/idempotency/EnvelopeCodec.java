package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.Instants;
import java.lang.reflect.Type;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.springframework.util.Assert;
import tools.jackson.core.JacksonException;
import tools.jackson.core.JsonParser;
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
 * Reads and writes the JSON event envelope.
 *
 * <p>{@link #decode(byte[])} checks the envelope itself: a JSON object with a UUID {@code event_id}, a non-empty
 * {@code event_name}, a {@code payload} object and, when present, an ISO-8601 {@code occurred_at}. Anything else is a
 * {@link RejectedMessageException} that names the reason. {@link #readPayload} maps the payload to the event's type;
 * with the default mapper every record component is required, unknown properties are ignored (producers may add
 * fields), and decimals, written as strings such as {@code "2.000"} or as JSON numbers, map to
 * {@link java.math.BigDecimal} exactly, scale included (never through a {@code double}).
 *
 * <p>What a message costs to read is bounded before it is read ({@link Limits}): a body over the size limit is
 * rejected unparsed; a JSON number anywhere in the body of more digits than the limit, or written with an exponent
 * beyond ten times it, is rejected; and a payload field mapped to a {@code BigDecimal} or a {@code Number} (from a JSON
 * number or a string) is rejected beyond the limit itself, before any arithmetic: {@code 1e100000000} is thirteen
 * characters of JSON, and rounding it writes out a hundred million digits. All are {@link Reason#INVALID_PAYLOAD}. A
 * string in a payload read as a tree ({@code JsonNode}, {@code Map}) is the business function's to bound.
 */
public final class EnvelopeCodec {

    static final String EVENT_ID = "event_id";
    static final String EVENT_NAME = "event_name";
    static final String OCCURRED_AT = "occurred_at";
    static final String PAYLOAD = "payload";

    private final JsonMapper jsonMapper;

    private final Limits limits;

    /** A codec with the default mapper described above and the default limits. */
    public EnvelopeCodec() {
        this(Limits.DEFAULTS);
    }

    /** A codec with the default mapper described above, bounded by the given limits. */
    public EnvelopeCodec(Limits limits) {
        this(defaultJsonMapper(limits), limits);
    }

    /**
     * A codec that maps payloads with the given mapper, with the default limits. The size of a body and the digits of
     * its JSON numbers are checked whatever the mapper; decimals given as strings are checked by the default mapper's
     * {@code BigDecimal} and {@code Number} deserializers (see {@link #defaultJsonMapper(Limits)}), not by another.
     */
    public EnvelopeCodec(JsonMapper jsonMapper) {
        this(jsonMapper, Limits.DEFAULTS);
    }

    /** A codec that maps payloads with the given mapper, bounded by the given limits. */
    public EnvelopeCodec(JsonMapper jsonMapper, Limits limits) {
        Assert.notNull(jsonMapper, "jsonMapper must not be null");
        Assert.notNull(limits, "limits must not be null");
        this.jsonMapper = jsonMapper;
        this.limits = limits;
    }

    /** The mapper the no-argument constructor uses. */
    public static JsonMapper defaultJsonMapper() {
        return defaultJsonMapper(Limits.DEFAULTS);
    }

    /**
     * The mapper described above, whose {@code BigDecimal} and {@code Number} fields (from JSON numbers or strings)
     * are refused beyond the limits' digits.
     */
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

    /**
     * Reads an envelope, leaving its payload as a JSON tree.
     *
     * @throws RejectedMessageException when the body is not a valid envelope
     */
    public EventEnvelope<JsonNode> decode(byte[] body) {
        JsonNode root = parseObject(body, "message body");
        UUID eventId = parseEventId(requiredText(root, EVENT_ID, null));
        checkNumbers(root, "", eventId);
        String eventName = requiredText(root, EVENT_NAME, eventId);
        JsonNode payload = root.get(PAYLOAD);
        if (payload == null || payload.isNull()) {
            throw missing(PAYLOAD, eventId);
        }
        if (!payload.isObject()) {
            throw new RejectedMessageException(
                    Reason.INVALID_PAYLOAD, eventId, "the envelope's payload is not a JSON object");
        }
        return new EventEnvelope<>(eventId, eventName, occurredAt(root, eventId), payload);
    }

    /**
     * Reads a message body that is a bare payload (a JSON object), for messages whose event id and name travel in
     * headers rather than in an envelope.
     *
     * @throws RejectedMessageException when the body is not a JSON object
     */
    public JsonNode decodePayload(byte[] body) {
        return decodePayload(body, null);
    }

    /**
     * Reads a bare payload, as {@link #decodePayload(byte[])}, whose event id (read from the headers) a rejection
     * names.
     *
     * @throws RejectedMessageException when the body is not a JSON object, or is beyond the limits
     */
    public JsonNode decodePayload(byte[] body, @Nullable UUID eventId) {
        JsonNode root = parseObject(body, "payload");
        checkNumbers(root, PAYLOAD, eventId);
        return root;
    }

    /**
     * Maps an envelope's payload to the given type.
     *
     * @throws RejectedMessageException when the payload does not map to the type
     */
    public <T> T readPayload(EventEnvelope<JsonNode> envelope, Type type) {
        return readPayload(envelope.payload(), type, envelope.eventName(), envelope.eventId());
    }

    /**
     * Maps a payload to the given type; the event's name and id only serve the message of the exception.
     *
     * @throws RejectedMessageException when the payload does not map to the type
     */
    public <T> T readPayload(JsonNode payload, Type type, String eventName, @Nullable UUID eventId) {
        JavaType javaType = this.jsonMapper.constructType(type);
        if (javaType.isTypeOrSubTypeOf(JsonNode.class)) {
            return this.jsonMapper.convertValue(payload, javaType);
        }
        try {
            return this.jsonMapper.treeToValue(payload, javaType);
        } catch (JacksonException ex) {
            throw new RejectedMessageException(
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
    }

    /**
     * Writes an envelope; the payload is written with the codec's mapper, or, given as a {@link RawValue} (a JSON
     * object's text, as a database returns a {@code jsonb} column), written as it is, without being parsed.
     */
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

    /**
     * The JSON object an outgoing event's payload is written as, with the codec's mapper.
     *
     * @throws IllegalArgumentException when the payload is not written as a JSON object (a string, a number, a list)
     */
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
     * Parses a UUID in its canonical 36-character form only ({@link UUID#fromString} also accepts shortened forms
     * such as {@code 1-2-3-4-5}, which no producer writes).
     *
     * @return the UUID, or {@code null} when the text is not a canonical UUID
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

    private JsonNode parseObject(byte[] body, String what) {
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
        JsonNode root;
        try {
            root = this.jsonMapper.readTree(body);
        } catch (JacksonException ex) {
            throw new RejectedMessageException(
                    Reason.NOT_JSON, null, "the %s is not JSON: %s".formatted(what, ex.getOriginalMessage()), ex);
        }
        if (root == null || root.isMissingNode()) {
            throw new RejectedMessageException(Reason.NOT_JSON, null, "the %s is blank".formatted(what));
        }
        if (!root.isObject()) {
            throw new RejectedMessageException(
                    Reason.NOT_AN_OBJECT,
                    null,
                    "the %s is JSON but not an object: %s".formatted(what, root.getNodeType()));
        }
        return root;
    }

    private static String requiredText(JsonNode root, String field, @Nullable UUID eventId) {
        JsonNode node = root.get(field);
        if (node == null || node.isNull()) {
            throw EVENT_ID.equals(field)
                    ? new RejectedMessageException(Reason.MISSING_EVENT_ID, null, "the envelope has no event_id")
                    : missing(field, eventId);
        }
        if (!node.isString() || node.stringValue().isBlank()) {
            Reason reason = EVENT_ID.equals(field) ? Reason.INVALID_EVENT_ID : Reason.MISSING_FIELD;
            throw new RejectedMessageException(
                    reason,
                    eventId,
                    "the envelope's %s is not a non-empty string: %s"
                            .formatted(field, Printable.of(String.valueOf(node))));
        }
        return node.stringValue();
    }

    private static UUID parseEventId(String text) {
        UUID eventId = parseCanonicalUuid(text);
        if (eventId == null) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    null,
                    "the envelope's event_id is not a UUID: '%s'".formatted(Printable.of(text)));
        }
        return eventId;
    }

    private static @Nullable Instant occurredAt(JsonNode root, UUID eventId) {
        JsonNode node = root.get(OCCURRED_AT);
        if (node == null || node.isNull()) {
            return null;
        }
        try {
            return Instants.parse(node.asString());
        } catch (DateTimeParseException ex) {
            throw new RejectedMessageException(
                    Reason.INVALID_OCCURRED_AT,
                    eventId,
                    "the envelope's occurred_at is not an ISO-8601 instant: %s"
                            .formatted(Printable.of(String.valueOf(node))),
                    ex);
        }
    }

    private static RejectedMessageException missing(String field, @Nullable UUID eventId) {
        return new RejectedMessageException(Reason.MISSING_FIELD, eventId, "the envelope has no %s".formatted(field));
    }

    /**
     * Rejects a JSON number, anywhere in the tree, of more digits than the limit, or written with an exponent beyond
     * ten times it: whatever the field's type, converting it (to a {@code long}, a {@code BigInteger}) or computing
     * with it costs in proportion. The exponent's bound is looser here than for a {@code BigDecimal} field, so that a
     * field the payload type ignores may hold any {@code double} ({@code 1.0E-200}, {@code Double.MAX_VALUE}). The
     * tree is walked without naming where each node is: the path is worked out for a number refused only.
     */
    private void checkNumbers(JsonNode node, String path, @Nullable UUID eventId) {
        BigDecimal refused = refusedNumber(node);
        if (refused != null) {
            throw new RejectedMessageException(
                    Reason.INVALID_PAYLOAD,
                    eventId,
                    "%s at %s".formatted(this.limits.refusal(refused), pathOf(node, refused, path)));
        }
    }

    /** The first number of the tree beyond the limits, or {@code null}. */
    private @Nullable BigDecimal refusedNumber(JsonNode node) {
        if (node.isContainer()) {
            for (JsonNode child : node) {
                BigDecimal refused = refusedNumber(child);
                if (refused != null) {
                    return refused;
                }
            }
            return null;
        }
        if (node.isBigDecimal() || node.isBigInteger()) {
            BigDecimal value = node.isBigDecimal() ? node.decimalValue() : new BigDecimal(node.bigIntegerValue());
            return this.limits.allowsAnywhere(value) ? null : value;
        }
        return null;
    }

    /** Where that refused number is in the tree, as {@code payload.lines[0].quantity}; {@code null} if not there. */
    private @Nullable String pathOf(JsonNode node, BigDecimal refused, String path) {
        if (node.isObject()) {
            for (Map.Entry<String, JsonNode> property : node.properties()) {
                String found = pathOf(
                        property.getValue(),
                        refused,
                        path.isEmpty() ? property.getKey() : path + "." + property.getKey());
                if (found != null) {
                    return found;
                }
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                String found = pathOf(node.get(i), refused, path + "[" + i + "]");
                if (found != null) {
                    return found;
                }
            }
        } else if (refused.equals(refusedNumber(node))) {
            return path;
        }
        return null;
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
     * What a message may cost to read.
     *
     * @param maxBytes the largest body read, in bytes
     * @param maxDecimalDigits the most digits a decimal may have, and the largest exponent (of either sign) it may be
     *     written with: {@code 1e100} and {@code 1e-100} are allowed with 100, {@code 1e101} is not
     */
    public record Limits(long maxBytes, int maxDecimalDigits) {

        /** 4 MiB, 100 digits. */
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

    /**
     * Jackson's own deserializer of a field typed {@code Number}, which reads decimals as {@code BigDecimal} (from a
     * JSON number or a string); those beyond the limit are refused.
     */
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
