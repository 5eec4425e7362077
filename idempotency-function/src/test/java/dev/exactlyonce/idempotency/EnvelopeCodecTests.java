package dev.exactlyonce.idempotency;

import static java.nio.charset.StandardCharsets.UTF_16LE;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import tools.jackson.core.TokenStreamFactory;
import tools.jackson.core.json.JsonFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.util.RawValue;

class EnvelopeCodecTests {

    private static final String EVENT_ID = "01937d6e-2a4c-7b1e-9f3a-5c2d1e0f4a8b";

    private final EnvelopeCodec codec = new EnvelopeCodec();

    record Line(UUID productId, BigDecimal quantity) {}

    record Order(UUID orderId, List<Line> lines) {}

    record Measure(Number value) {}

    @Test
    void decodesAnEnvelopeAndMapsItsPayload() {
        EventEnvelope<JsonNode> envelope = this.codec.decode(bytes("""
                {"event_id": "%s", "event_name": "order.placed", "occurred_at": "2026-11-29T10:15:30.123Z",
                 "payload": {"orderId": "%s", "lines": [{"productId": "%s", "quantity": "2.000"}], "extra": 1}}""".formatted(EVENT_ID, EVENT_ID, EVENT_ID)));

        Order order = this.codec.readPayload(envelope, Order.class);

        assertThat(envelope.eventId()).isEqualTo(UUID.fromString(EVENT_ID));
        assertThat(envelope.eventName()).isEqualTo("order.placed");
        assertThat(envelope.occurredAt()).isEqualTo(Instant.parse("2026-11-29T10:15:30.123Z"));
        assertThat(order.lines())
                .singleElement()
                .satisfies(line -> assertThat(line.quantity()).isEqualTo(new BigDecimal("2.000")));
    }

    @Test
    void readsAnEnvelopeLeavingItsPayloadAsItCameThenMapsItFromItsBytes() {
        String payload = """
                {"orderId": "%s", "lines": [{"productId": "%s", "quantity": 2.000}], "extra": [1.5, {"a": null}]}""".formatted(EVENT_ID, EVENT_ID);
        EventEnvelope<EnvelopeCodec.RawPayload> envelope = this.codec.read(bytes("""
                {"event_id": "%s", "event_name": "order.placed", "payload": %s, "after": true}""".formatted(EVENT_ID, payload)));

        Order order = this.codec.readPayload(envelope.payload(), Order.class, "order.placed", envelope.eventId());

        assertThat(envelope.payload()).hasToString(payload);
        assertThat(order.lines())
                .singleElement()
                .satisfies(line -> assertThat(line.quantity()).isEqualTo(new BigDecimal("2.000")));
        assertThat(this.codec
                        .<JsonNode>readPayload(envelope.payload(), JsonNode.class, "order.placed", null)
                        .get("extra")
                        .get(1)
                        .has("a"))
                .isTrue();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            an object left open          | {"event_id": "%1$s", "event_name": "a", "payload": {}
            a payload left open          | {"event_id": "%1$s", "event_name": "a", "payload": {"a": [1, 2}}
            a second value after it      | {"event_id": "%1$s", "event_name": "a", "payload": {}} {}
            text after it                | {"event_id": "%1$s", "event_name": "a", "payload": {}} x
            """)
    void rejectsABodyThatIsNotOneWholeJsonObjectAsNotJson(String kind, String body) {
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.read(bytes(body.formatted(EVENT_ID))))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(Reason.NOT_JSON));
    }

    @Test
    void findsThePayloadByItsBytesAfterTextOfManyBytesPerCharacter() {
        String payload = "{\"note\": \"crème brûlée, 東京 🚚\", \"orderId\": \"%s\", \"lines\": []}".formatted(EVENT_ID);
        String envelope = "{\"event_id\": \"%s\", \"event_name\": \"passée.résumé\", \"payload\": %s, \"z\": \"ü\"}"
                .formatted(EVENT_ID, payload);

        EventEnvelope<EnvelopeCodec.RawPayload> read = this.codec.read(bytes(envelope));
        byte[] withByteOrderMark = bytes("\uFEFF" + envelope);

        assertThat(read.eventName()).isEqualTo("passée.résumé");
        assertThat(read.payload()).hasToString(payload);
        assertThat(this.codec.read(withByteOrderMark).payload()).hasToString(payload);
        assertThat(this.codec
                        .<Order>readPayload(read.payload(), Order.class, "a", null)
                        .orderId())
                .isEqualTo(UUID.fromString(EVENT_ID));
    }

    @Test
    void readsWithAMapperThatReadsBytesAsCharacters() {
        JsonMapper mapper = JsonMapper.builder(JsonFactory.builder()
                        .disable(TokenStreamFactory.Feature.CANONICALIZE_PROPERTY_NAMES)
                        .build())
                .build();
        String payload = "{\"orderId\": \"%s\", \"lines\": [], \"note\": \"東京\"}".formatted(EVENT_ID);

        EventEnvelope<EnvelopeCodec.RawPayload> read =
                new EnvelopeCodec(mapper).read(bytes("""
                {"event_id": "%s", "event_name": "東京", "payload": %s}""".formatted(EVENT_ID, payload)));

        assertThat(read.payload()).hasToString(payload);
    }

    @Test
    void refusesABodyInUtf16AsNotJson() {
        byte[] body = """
                {"event_id": "%s", "event_name": "a", "payload": {}}""".formatted(EVENT_ID).getBytes(UTF_16LE);

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.read(body))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(Reason.NOT_JSON))
                .withMessageContaining("not UTF-8");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            an event id not a UUID first       | {"event_id": "abc", "event_name": "a", "payload": {"q": 1e100000000}}       | INVALID_EVENT_ID
            then a number beyond the limits    | {"event_id": "%1$s", "payload": {"q": 1e100000000}}                         | INVALID_PAYLOAD
            a number the parser cannot read    | {"event_id": "%1$s", "event_name": "a", "payload": {"q": 1e100000000, "r": 1e99999999999}} | NOT_JSON
            an occurred_at that is a number    | {"event_id": "%1$s", "event_name": "a", "occurred_at": 1700000000, "payload": {}} | INVALID_OCCURRED_AT
            an occurred_at that is an object   | {"event_id": "%1$s", "event_name": "a", "occurred_at": {}, "payload": {}}  | INVALID_OCCURRED_AT
            """)
    void rejectsInTheOrderOfTheChecks(String kind, String body, Reason reason) {
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.read(bytes(body.formatted(EVENT_ID))))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(reason));
    }

    @Test
    void namesWhereARefusedNumberIsOutsideThePayloadAndInNestedArrays() {
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.read(bytes("""
                        {"event_id": "%s", "event_name": "a", "x": [[1, 1e100000000]], "payload": {}}""".formatted(EVENT_ID))))
                .withMessageEndingWith("at x[0][1]");
    }

    @Test
    void takesTheLastOfAFieldGivenTwiceAsATreeWould() {
        UUID last = UUID.randomUUID();
        EventEnvelope<EnvelopeCodec.RawPayload> envelope = this.codec.read(bytes("""
                {"event_id": "%s", "event_name": "a", "payload": {"first": 1}, "event_id": "%s", "payload": {}}""".formatted(EVENT_ID, last)));

        assertThat(envelope.eventId()).isEqualTo(last);
        assertThat(envelope.payload()).hasToString("{}");
    }

    @Test
    void writesWhatItReads() {
        EventEnvelope<Order> envelope = new EventEnvelope<>(
                UUID.randomUUID(),
                "order.placed",
                Instant.parse("2026-11-29T10:15:30Z"),
                new Order(UUID.randomUUID(), List.of(new Line(UUID.randomUUID(), new BigDecimal("1.500")))));

        EventEnvelope<JsonNode> decoded = this.codec.decode(this.codec.encode(envelope));

        assertThat(decoded.eventId()).isEqualTo(envelope.eventId());
        assertThat(decoded.occurredAt()).isEqualTo(envelope.occurredAt());
        Order payload = this.codec.readPayload(decoded, Order.class);
        assertThat(payload).isEqualTo(envelope.payload());
    }

    @Test
    void writesAPayloadGivenAsJsonTextAsItIs() {
        UUID eventId = UUID.randomUUID();
        String payload = "{\"orderId\": \"%s\", \"lines\": [{\"productId\": \"%s\", \"quantity\": 1.500}]}"
                .formatted(UUID.randomUUID(), UUID.randomUUID());

        byte[] body = this.codec.encode(new EventEnvelope<>(
                eventId, "order.placed", Instant.parse("2026-11-29T10:15:30Z"), new RawValue(payload)));

        assertThat(new String(body, UTF_8)).contains("\"payload\":" + payload);
        EventEnvelope<JsonNode> decoded = this.codec.decode(body);
        assertThat(decoded.eventId()).isEqualTo(eventId);
        Order order = this.codec.readPayload(decoded, Order.class);
        assertThat(order.lines())
                .singleElement()
                .satisfies(line -> assertThat(line.quantity()).isEqualTo(new BigDecimal("1.500")));
    }

    @Test
    void acceptsAnEnvelopeWithoutOccurredAt() {
        EventEnvelope<JsonNode> envelope = this.codec.decode(bytes("""
                {"event_id": "%s", "event_name": "order.placed", "payload": {}}""".formatted(EVENT_ID)));

        assertThat(envelope.occurredAt()).isNull();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            empty body                  |                                                          | NOT_JSON
            not JSON                    | hello                                                    | NOT_JSON
            truncated JSON              | {"event_id":                                             | NOT_JSON
            JSON array                  | [1, 2]                                                   | NOT_AN_OBJECT
            JSON string                 | "text"                                                   | NOT_AN_OBJECT
            a number beyond the limits  | 1e999999                                                 | NOT_AN_OBJECT
            no event_id                 | {"event_name": "a", "payload": {}}                       | MISSING_EVENT_ID
            null event_id               | {"event_id": null, "event_name": "a", "payload": {}}     | MISSING_EVENT_ID
            numeric event_id            | {"event_id": 12, "event_name": "a", "payload": {}}       | INVALID_EVENT_ID
            event_id not a UUID         | {"event_id": "abc", "event_name": "a", "payload": {}}    | INVALID_EVENT_ID
            shortened UUID              | {"event_id": "1-2-3-4-5", "event_name": "a", "payload": {}} | INVALID_EVENT_ID
            no event_name               | {"event_id": "%1$s", "payload": {}}                      | MISSING_FIELD
            blank event_name            | {"event_id": "%1$s", "event_name": " ", "payload": {}}   | MISSING_FIELD
            no payload                  | {"event_id": "%1$s", "event_name": "a"}                  | MISSING_FIELD
            payload not an object       | {"event_id": "%1$s", "event_name": "a", "payload": 3}    | INVALID_PAYLOAD
            bad occurred_at             | {"event_id": "%1$s", "event_name": "a", "occurred_at": "yesterday", "payload": {}} | INVALID_OCCURRED_AT
            """)
    void rejectsWhatIsNotAnEnvelopeWithItsReason(String kind, String body, Reason reason) {
        byte[] bytes = bytes(body == null ? "" : body.formatted(EVENT_ID));

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.decode(bytes))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(reason))
                .withMessageStartingWith(reason + ": the ");
    }

    @Test
    void namesTheEventIdOfAnEnvelopeRejectedAfterItWasRead() {
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.decode(bytes("""
                        {"event_id": "%s", "payload": {}}""".formatted(EVENT_ID))))
                .satisfies(ex -> assertThat(ex.eventId()).isEqualTo(UUID.fromString(EVENT_ID)))
                .withMessage("MISSING_FIELD: the envelope has no event_name");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
            product id not a UUID     | {"orderId": "%1$s", "lines": [{"productId": "p-1", "quantity": "1"}]} | at payload.lines[0].productId
            quantity not a decimal    | {"orderId": "%1$s", "lines": [{"productId": "%1$s", "quantity": "two"}]} | at payload.lines[0].quantity
            missing field             | {"lines": []}                                                          | orderId
            null field                | {"orderId": null, "lines": []}                                         | orderId
            """)
    void rejectsAPayloadThatDoesNotMapToItsTypeAndSaysWhere(String kind, String payload, String where) {
        EventEnvelope<JsonNode> envelope =
                this.codec.decode(bytes("""
                {"event_id": "%s", "event_name": "order.placed", "payload": %s}""".formatted(EVENT_ID, payload.formatted(EVENT_ID))));

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.readPayload(envelope, Order.class))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(Reason.INVALID_PAYLOAD))
                .satisfies(ex -> assertThat(ex.eventId()).isEqualTo(UUID.fromString(EVENT_ID)))
                .withMessageStartingWith("INVALID_PAYLOAD: the payload of order.placed does not map to Order")
                .withMessageContaining(where);
    }

    @Test
    void saysWhereARawPayloadDoesNotMapAsForATree() {
        EventEnvelope<EnvelopeCodec.RawPayload> envelope = this.codec.read(bytes("""
                {"event_id": "%s", "event_name": "order.placed",
                 "payload": {"orderId": "%s", "lines": [{"productId": "p-1", "quantity": "1"}]}}""".formatted(EVENT_ID, EVENT_ID)));

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.readPayload(envelope.payload(), Order.class, "order.placed", null))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(Reason.INVALID_PAYLOAD))
                .withMessageStartingWith("INVALID_PAYLOAD: the payload of order.placed does not map to Order")
                .withMessageContaining("at payload.lines[0].productId");
    }

    @Test
    void readsABarePayloadAsItCame() {
        assertThat(this.codec.readBarePayload(bytes(" {\"orderId\": 1} "), null))
                .hasToString(" {\"orderId\": 1} ");
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.readBarePayload(bytes("{\"lines\": [{\"q\": 1e100000000}]}"), null))
                .withMessageContaining("at payload.lines[0].q");
    }

    @Test
    void readsABarePayload() {
        assertThat(this.codec
                        .decodePayload(bytes("{\"orderId\": 1}"))
                        .get("orderId")
                        .asInt())
                .isEqualTo(1);
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.decodePayload(bytes("[]")))
                .withMessage("NOT_AN_OBJECT: the payload is JSON but not an object: ARRAY");
    }

    @Test
    void parsesOnlyCanonicalUuids() {
        assertThat(EnvelopeCodec.parseCanonicalUuid(EVENT_ID)).isEqualTo(UUID.fromString(EVENT_ID));
        assertThat(EnvelopeCodec.parseCanonicalUuid(EVENT_ID.toUpperCase())).isEqualTo(UUID.fromString(EVENT_ID));
        assertThat(EnvelopeCodec.parseCanonicalUuid("1-2-3-4-5")).isNull();
        assertThat(EnvelopeCodec.parseCanonicalUuid(EVENT_ID.replace('-', 'x'))).isNull();
        assertThat(EnvelopeCodec.parseCanonicalUuid(EVENT_ID.replace('a', 'g'))).isNull();
    }

    private static byte[] bytes(String text) {
        return text.getBytes(UTF_8);
    }

    @Test
    void aFieldTypedNumberIsBoundedLikeABigDecimal() {
        EventEnvelope<JsonNode> envelope =
                this.codec.decode("""
                {"event_id": "%s", "event_name": "measured", "payload": {"value": "1e100000000"}}""".formatted(UUID.randomUUID()).getBytes(UTF_8));

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.readPayload(envelope, Measure.class))
                .satisfies(ex -> assertThat(ex.reason()).isEqualTo(Reason.INVALID_PAYLOAD))
                .withMessageContaining("scale -100000000");
    }

    @Test
    void aNumberBeyondTheBoundKeepsTheEventIdOfItsEnvelope() {
        UUID eventId = UUID.randomUUID();

        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(() -> this.codec.decode("""
                        {"event_id": "%s", "event_name": "measured", "payload": {"value": 1e100000000}}""".formatted(eventId).getBytes(UTF_8)))
                .satisfies(ex -> assertThat(ex.eventId()).isEqualTo(eventId))
                .withMessageContaining("at payload.value");
    }

    @Test
    void aNumberBeyondTheBoundIsNamedWhereverItIsInThePayload() {
        assertThatExceptionOfType(RejectedMessageException.class)
                .isThrownBy(
                        () -> this.codec.decode("""
                        {"event_id": "%s", "event_name": "measured",
                         "payload": {"lines": [{"quantity": 1.5, "note": [1, 2]}, {"quantity": 1e100000000}]}}""".formatted(UUID.randomUUID()).getBytes(UTF_8)))
                .withMessageContaining("at payload.lines[1].quantity");
    }

    @Test
    void anyDoubleMayBeInAFieldThePayloadTypeIgnores() {
        EventEnvelope<JsonNode> envelope = this.codec.decode(
                """
                {"event_id": "%s", "event_name": "order.placed",
                 "payload": {"orderId": "%s", "lines": [], "tiny": 1.0E-200, "huge": 1.7976931348623157E308}}""".formatted(UUID.randomUUID(), UUID.randomUUID()).getBytes(UTF_8));

        Order order = this.codec.readPayload(envelope, Order.class);

        assertThat(order.lines()).isEmpty();
    }
}
