package dev.exactlyonce.console;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.LongStream;
import org.jspecify.annotations.Nullable;
import org.springframework.http.MediaType;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.stereotype.Component;
import org.springframework.web.client.RestClient;
import tools.jackson.databind.JsonNode;

/**
 * The dead-letter queues ({@code <queue>.dlq}) through RabbitMQ's management API, their messages grouped by cause. A
 * group's cause is the library's rejection reason ({@code ROUTE_MISMATCH}, {@code NOT_JSON}, ... at the head of
 * {@code x-exception-message}), or else the exception's type and the first frame of application code in
 * {@code x-exception-stacktrace}. The messages are read and put back ({@code ack_requeue_true}), only from queues where
 * that changes nothing: a classic queue, or a quorum queue without a delivery limit ({@link #unreadable}).
 */
@Component
class BrokerDeadLetters {

    /** The most messages of a queue read for its groups: a longer queue shows its first ones, and says so. */
    static final int READ = 500;

    /** The most characters of a sample's payload shown. */
    static final int PAYLOAD_SHOWN = 4_000;

    private static final Pattern REASON = Pattern.compile("^([A-Z][A-Z_]{2,}): ");

    private static final Pattern THROWN =
            Pattern.compile("^\\s*(?:Caused by: |Suppressed: )?([a-zA-Z_$][\\w$]*(?:\\.[a-zA-Z_$][\\w$]*)+): ?(.*)$");

    private static final Pattern FRAME = Pattern.compile("^\\s*at ([\\w$.]+)\\.([\\w$<>]+)\\(");

    /** Frames of the platform, the frameworks and the library, which a cause skips for the application's first. */
    private static final List<String> NOT_APPLICATION = List.of(
            "java.",
            "javax.",
            "jdk.",
            "sun.",
            "org.springframework.",
            "com.rabbitmq.",
            "reactor.",
            "io.micrometer.",
            "dev.exactlyonce.idempotency.",
            "com.zaxxer.",
            "org.postgresql.",
            "org.mariadb.");

    /** A dead-letter queue, and its messages grouped by cause, the largest group first. */
    record Queue(
            String name,
            long messages,
            boolean partlyRead,
            List<Group> groups,
            @Nullable String notRead) {}

    /** Messages of one cause, with the first as a sample. */
    record Group(String cause, int count, Sample sample) {}

    /** A message: its routing key, headers and payload (cut), as text. */
    record Sample(String routingKey, Map<String, String> headers, String payload) {}

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

    /** Every dead-letter queue of the virtual host, with its groups. */
    List<Queue> queues() {
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
                            ? read(name)
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
    private Queue read(String queue) {
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
        for (JsonNode message : read) {
            JsonNode headers = message.path("properties").path("headers");
            Map<String, String> shown = new LinkedHashMap<>();
            headers.propertyNames().forEach(name -> shown.put(name, text(headers.path(name))));
            byCause.computeIfAbsent(cause(shown), cause -> new ArrayList<>())
                    .add(new Sample(
                            message.path("routing_key").asString(),
                            shown,
                            message.path("payload").asString()));
        }
        List<Group> groups = byCause.entrySet().stream()
                .map(group -> new Group(
                        group.getKey(),
                        group.getValue().size(),
                        group.getValue().get(0)))
                .sorted((a, b) -> Integer.compare(b.count(), a.count()))
                .toList();
        return new Queue(queue, read.size() + left, left > 0, groups, null);
    }

    /** A dead letter's cause: the library's rejection reason, or the exception's type and first application frame. */
    static String cause(Map<String, String> headers) {
        String message = headers.getOrDefault("x-exception-message", "");
        Matcher reason = REASON.matcher(message);
        if (reason.find()) {
            return reason.group(1);
        }
        String trace = headers.get("x-exception-stacktrace");
        if (trace == null || trace.isBlank()) {
            return message.isBlank()
                    ? "no cause recorded"
                    : "unknown: " + message.lines().findFirst().orElse("");
        }
        // The real cause is the exception of the trace whose message is the dead letter's (the library puts the real
        // cause's there); else the trace's last cause. A trace of the binder's holds several, and circular references.
        List<String> lines = trace.lines().toList();
        int at = -1;
        String type = "unknown";
        for (int i = 0; i < lines.size(); i++) {
            Matcher thrown = THROWN.matcher(lines.get(i));
            if (!thrown.find()) {
                continue;
            }
            boolean cause = lines.get(i).strip().startsWith("Caused by: ");
            if (thrown.group(2).strip().equals(message.strip())) {
                at = i;
                type = thrown.group(1);
                break;
            }
            if (at < 0 || cause) {
                at = i;
                type = thrown.group(1);
            }
        }
        for (String line : lines.subList(Math.max(at, 0), lines.size())) {
            Matcher frame = FRAME.matcher(line);
            if (frame.find() && NOT_APPLICATION.stream().noneMatch(frame.group(1)::startsWith)) {
                return type + " at " + frame.group(1) + "." + frame.group(2);
            }
        }
        return type;
    }

    private static String text(JsonNode value) {
        return value.isString() ? value.asString() : value.toString();
    }
}
