package dev.exactlyonce.console;

import dev.exactlyonce.deadletters.DeadLetterCause;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.LongStream;
import org.jspecify.annotations.Nullable;
import org.springframework.http.MediaType;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.stereotype.Component;
import org.springframework.web.client.RestClient;
import tools.jackson.core.type.TypeReference;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The dead-letter queues ({@code <queue>.dlq}) through RabbitMQ's management API, their messages grouped by cause
 * ({@link DeadLetterCause}, as the replay selects them). The messages are read and put back ({@code ack_requeue_true}),
 * only from queues where that changes nothing: a classic queue, or a quorum queue without a delivery limit
 * ({@link #unreadable}).
 */
@Component
class BrokerDeadLetters {

    /** The most messages of a queue read for its groups: a longer queue shows its first ones, and says so. */
    static final int READ = 500;

    /** The most characters of a sample's payload shown. */
    static final int PAYLOAD_SHOWN = 4_000;

    /** A dead-letter queue, and its messages grouped by cause, the largest group first. */
    record Queue(
            String name,
            long messages,
            boolean partlyRead,
            List<Group> groups,
            @Nullable String notRead) {}

    /**
     * Messages of one cause, with the first as a sample, and the first {@link #LISTED} listed; first and last seen:
     * when the earliest and the latest of them were dead-lettered, as far as known ({@code null}: none is dated).
     */
    record Group(
            String cause,
            int count,
            Sample sample,
            List<Listed> messages,
            @Nullable Instant firstSeen,
            @Nullable Instant lastSeen) {}

    /** A message of a group, as the page lists it to be selected: by its event id, where it has one. */
    record Listed(@Nullable UUID eventId, String routingKey) {}

    /** The most messages of a group listed. */
    static final int LISTED = 50;

    /** A message: its routing key, headers and payload (cut), as text. */
    record Sample(String routingKey, Map<String, String> headers, String payload) {}

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private static final TypeReference<Map<String, Object>> HEADERS = new TypeReference<>() {};

    private final ConsoleProperties.@Nullable Broker broker;

    private final @Nullable RestClient http;

    BrokerDeadLetters(ConsoleProperties properties, RestClient.Builder builder) {
        this.broker = properties.broker();
        SimpleClientHttpRequestFactory requests = new SimpleClientHttpRequestFactory();
        requests.setConnectTimeout(properties.timeout());
        requests.setReadTimeout(properties.timeout().multipliedBy(5));
        this.http = this.broker == null
                ? null
                : builder.clone()
                        .requestFactory(requests)
                        .baseUrl(this.broker.managementUrl().resolve("/api/").toString())
                        .defaultHeaders(headers -> headers.setBasicAuth(this.broker.username(), this.broker.password()))
                        .build();
    }

    /** Whether the settings name a broker. */
    boolean configured() {
        return this.http != null;
    }

    /**
     * Every dead-letter queue of the virtual host, with its groups.
     *
     * @param dated when each dead letter was dead-lettered, by event id, as the services recorded it: a dead letter
     *     carries no such time (the binder's republication records none); the broker's own dead letters carry theirs
     *     ({@code x-death})
     */
    List<Queue> queues(Map<UUID, Instant> dated) {
        if (this.http == null || this.broker == null) {
            return List.of();
        }
        JsonNode queues = this.http
                .get()
                .uri(
                        "queues/{vhost}?columns=name,type,messages,arguments,effective_policy_definition",
                        this.broker.virtualHost())
                .retrieve()
                .body(JsonNode.class);
        List<Queue> found = new ArrayList<>();
        if (queues == null) {
            return found;
        }
        for (JsonNode queue : queues.valueStream().toList()) {
            String name = queue.path("name").asString();
            if (!name.endsWith(".dlq")) {
                continue;
            }
            String notRead = unreadable(queue);
            found.add(
                    notRead == null
                            ? read(name, dated)
                            : new Queue(name, queue.path("messages").asLong(), false, List.of(), notRead));
        }
        return found;
    }

    /**
     * Why the console does not read the queue, or {@code null} when reading it changes nothing: a message read and
     * put back is a return, which a quorum queue counts against its delivery limit (20 by default on RabbitMQ 4; past
     * it the message is dropped, or dead-lettered again), and a stream cannot be read that way.
     */
    static @Nullable String unreadable(JsonNode queue) {
        String type = queue.path("type").asString();
        if (type.equals("stream")) {
            return "a stream: its messages are not read here";
        }
        if (!type.equals("quorum")) {
            return null;
        }
        // The queue's argument and its policy's value: where either limits, the lower limit counts (unlimited only
        // when neither does); with neither, RabbitMQ 4's default, 20.
        JsonNode policy = queue.path("effective_policy_definition").path("delivery-limit");
        JsonNode argument = queue.path("arguments").path("x-delivery-limit");
        long limit = !policy.isNumber() && !argument.isNumber()
                ? 20
                : LongStream.of(policy.isNumber() ? policy.asLong() : -1, argument.isNumber() ? argument.asLong() : -1)
                        .filter(value -> value >= 0)
                        .min()
                        .orElse(-1);
        return limit < 0
                ? null
                : ("a quorum queue with a delivery limit of %d: reading its messages and putting them back would count"
                                + " against it; give dead-letter queues delivery-limit -1 (a policy), as the shop's"
                                + " definitions do")
                        .formatted(limit);
    }

    /**
     * Reads the queue's first messages, and puts them back. Its length is what was read and what the broker says was
     * left behind it: the queue list's own count lags by the broker's statistics interval.
     */
    private Queue read(String queue, Map<UUID, Instant> dated) {
        JsonNode messages = this.http
                .post()
                .uri("queues/{vhost}/{queue}/get", this.broker.virtualHost(), queue)
                .contentType(MediaType.APPLICATION_JSON)
                .body(Map.of(
                        "count", READ, "ackmode", "ack_requeue_true", "encoding", "auto", "truncate", PAYLOAD_SHOWN))
                .retrieve()
                .body(JsonNode.class);
        List<JsonNode> read = messages != null ? messages.valueStream().toList() : List.of();
        long left = read.isEmpty()
                ? 0
                : read.get(read.size() - 1).path("message_count").asLong();
        Map<String, List<Sample>> byCause = new LinkedHashMap<>();
        Map<String, List<Listed>> listed = new LinkedHashMap<>();
        Map<String, List<Instant>> seenOf = new HashMap<>();
        for (JsonNode message : read) {
            JsonNode headers = message.path("properties").path("headers");
            Map<String, String> shown = new LinkedHashMap<>();
            headers.propertyNames().forEach(name -> shown.put(name, text(headers.path(name))));
            Map<String, Object> values = JSON.convertValue(headers, HEADERS);
            String cause = DeadLetterCause.of(values != null ? values : Map.of());
            String routingKey = message.path("routing_key").asString();
            byCause.computeIfAbsent(cause, any -> new ArrayList<>())
                    .add(new Sample(routingKey, shown, message.path("payload").asString()));
            UUID eventId = eventId(message, values);
            List<Listed> ofCause = listed.computeIfAbsent(cause, any -> new ArrayList<>());
            if (ofCause.size() < LISTED) {
                ofCause.add(new Listed(eventId, routingKey));
            }
            Instant seen = eventId != null && dated.containsKey(eventId)
                    ? dated.get(eventId)
                    : DeadLetterCause.brokersDeathTime(values != null ? values : Map.of());
            if (seen != null) {
                seenOf.computeIfAbsent(cause, any -> new ArrayList<>()).add(seen);
            }
        }
        List<Group> groups = byCause.entrySet().stream()
                .map(group -> {
                    List<Instant> seen = seenOf.getOrDefault(group.getKey(), List.of());
                    return new Group(
                            group.getKey(),
                            group.getValue().size(),
                            group.getValue().get(0),
                            listed.get(group.getKey()),
                            seen.stream().min(Instant::compareTo).orElse(null),
                            seen.stream().max(Instant::compareTo).orElse(null));
                })
                .sorted((a, b) -> Integer.compare(b.count(), a.count()))
                .toList();
        return new Queue(queue, read.size() + left, left > 0, groups, null);
    }

    /**
     * A message's event id, as the replay reads it: its payload is whole unless it is longer than
     * {@link #PAYLOAD_SHOWN} characters (then only its headers and message id are read).
     */
    private static @Nullable UUID eventId(JsonNode message, @Nullable Map<String, Object> headers) {
        String payload = message.path("payload").asString();
        byte[] body = message.path("payload_encoding").asString().equals("base64")
                ? Base64.getDecoder().decode(payload)
                : payload.getBytes(StandardCharsets.UTF_8);
        JsonNode messageId = message.path("properties").path("message_id");
        return DeadLetterReplay.eventId(
                body, headers != null ? headers : Map.of(), messageId.isString() ? messageId.asString() : null);
    }

    private static String text(JsonNode value) {
        return value.isString() ? value.asString() : value.toString();
    }
}
