package dev.exactlyonce.console;

import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.http.MediaType;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.stereotype.Component;
import org.springframework.web.client.HttpClientErrorException;
import org.springframework.web.client.RestClient;
import org.springframework.web.client.RestClientException;
import tools.jackson.databind.JsonNode;

/**
 * The services' Actuator endpoints, as the console reads them: {@code health} (with its details, for the outage's halt),
 * {@code idempotency} and {@code outbox}. An instance that does not answer within {@code console.timeout} is shown
 * unreachable, with the reason, rather than failing the page.
 */
@Component
class ServiceEndpoints {

    /** An instance of a service, as its endpoints describe it; {@code unreachable} says why when they did not. */
    record Instance(
            String service,
            URI url,
            String status,
            @Nullable Instant haltedSince,
            @Nullable String haltCause,
            List<String> guardedBindings,
            @Nullable Claims claims,
            @Nullable DeadLetters deadLetters,
            @Nullable Outbox outbox,
            @Nullable String unreachable) {}

    /**
     * The table of processed event ids: its size, how old its oldest row is against the retention, and the instance's
     * last purge of it ({@code null} before its first).
     */
    record Claims(
            String table,
            long approximateRows,
            @Nullable Duration oldestAge,
            Duration retention,
            @Nullable String lastPurge) {}

    /** The dead letters still waiting to be replayed, the oldest's age against their retention. */
    record DeadLetters(long waiting, @Nullable Duration oldestAge, Duration retention) {

        /** The oldest's share of the retention, in percent: at 100 a replay of it is refused. */
        public int percentOfRetention() {
            return this.oldestAge == null || this.retention.toMillis() <= 0
                    ? 0
                    : (int) Math.min(100, this.oldestAge.toMillis() * 100 / this.retention.toMillis());
        }
    }

    /** What waits in the outbox. */
    record Outbox(long unpublished, Duration lag, long parked) {}

    /** An outbox row the relay parked. */
    record Parked(
            String service,
            URI url,
            UUID id,
            String destination,
            String key,
            String eventName,
            int attempts,
            @Nullable String lastError,
            Instant parkedAt,
            long heldBack) {}

    /** What one instance knows of an event: its claims, the dead letters recorded of it, its outbox row. */
    record Lookup(
            String service,
            URI url,
            List<Claim> claims,
            List<DeadLetter> deadLetters,
            @Nullable Emitted emitted,
            @Nullable String unreachable) {}

    /** A claim of the event: applied, under that scope ({@code ""}: the service's) and name. */
    record Claim(String scope, String eventName, String processedAt) {}

    /** A dead letter of the event the guard recorded; {@code takenBackAt} once a replay of it was applied. */
    record DeadLetter(
            String binding, String deadLetteredAt, @Nullable String takenBackAt) {}

    /** The event in the instance's outbox, and where it stands: published, skipped, parked or waiting. */
    record Emitted(String eventName, String key, String state) {}

    private final ConsoleProperties properties;

    private final RestClient http;

    ServiceEndpoints(ConsoleProperties properties, RestClient.Builder builder) {
        this.properties = properties;
        SimpleClientHttpRequestFactory requests = new SimpleClientHttpRequestFactory();
        requests.setConnectTimeout(properties.timeout());
        requests.setReadTimeout(properties.timeout());
        this.http = builder.requestFactory(requests).build();
    }

    /** Every instance of every service, in the order of the settings. */
    List<Instance> instances() {
        return this.properties.services().stream()
                .flatMap(service -> service.instances().stream().map(url -> {
                    try {
                        return instance(service.name(), url);
                    } catch (RuntimeException ex) {
                        // An answer the console cannot read (a proxy's error page, a field missing): shown, not fatal.
                        return new Instance(
                                service.name(),
                                url,
                                "UNREACHABLE",
                                null,
                                null,
                                List.of(),
                                null,
                                null,
                                null,
                                reason(ex));
                    }
                }))
                .toList();
    }

    /** The parked rows of the instances that answered, and why each other did not. */
    record ParkedRows(List<Parked> rows, List<String> unreachable) {}

    /** Every parked row of every instance, oldest first per instance. */
    ParkedRows parked() {
        List<Parked> rows = new ArrayList<>();
        List<String> unreachable = new ArrayList<>();
        for (ConsoleProperties.Service service : this.properties.services()) {
            for (URI url : service.instances()) {
                try {
                    JsonNode outbox = this.http
                            .get()
                            .uri(url.resolve("/actuator/outbox"))
                            .retrieve()
                            .body(JsonNode.class);
                    if (outbox == null) {
                        continue;
                    }
                    for (JsonNode row : outbox.path("parked").valueStream().toList()) {
                        rows.add(new Parked(
                                service.name(),
                                url,
                                UUID.fromString(row.path("id").asString()),
                                row.path("destination").asString(),
                                row.path("key").asString(),
                                row.path("eventName").asString(),
                                row.path("attempts").asInt(),
                                text(row.path("lastError")),
                                Instant.parse(row.path("parkedAt").asString()),
                                row.path("heldBack").asLong()));
                    }
                } catch (HttpClientErrorException.NotFound ex) {
                    // A service without a relay has no outbox endpoint, and no parked row.
                } catch (RuntimeException ex) {
                    unreachable.add("%s at %s: %s".formatted(service.name(), url, reason(ex)));
                }
            }
        }
        return new ParkedRows(rows, unreachable);
    }

    /** What each instance knows of the event. */
    List<Lookup> lookup(UUID eventId) {
        return this.properties.services().stream()
                .flatMap(service -> service.instances().stream().map(url -> {
                    try {
                        JsonNode found = this.http
                                .get()
                                .uri(url.resolve("/actuator/idempotency/" + eventId))
                                .retrieve()
                                .body(JsonNode.class);
                        if (found == null) {
                            return new Lookup(service.name(), url, List.of(), List.of(), null, "no answer");
                        }
                        return new Lookup(
                                service.name(),
                                url,
                                found.path("claims")
                                        .valueStream()
                                        .map(claim -> new Claim(
                                                claim.path("scope").asString(),
                                                claim.path("eventName").asString(),
                                                claim.path("processedAt").asString()))
                                        .toList(),
                                found.path("deadLetters")
                                        .valueStream()
                                        .map(deadLetter -> new DeadLetter(
                                                deadLetter.path("binding").asString(),
                                                deadLetter
                                                        .path("deadLetteredAt")
                                                        .asString(),
                                                text(deadLetter.path("takenBackAt"))))
                                        .toList(),
                                emitted(found.path("emitted")),
                                null);
                    } catch (RuntimeException ex) {
                        return new Lookup(service.name(), url, List.of(), List.of(), null, reason(ex));
                    }
                }))
                .toList();
    }

    /**
     * Releases or skips a parked row through the instance's {@code outbox} endpoint (which the service enables with
     * {@code management.endpoint.outbox.access: unrestricted}); whether it was applied (not when the row was no longer parked).
     */
    boolean act(URI url, UUID id, String action) {
        JsonNode result = this.http
                .post()
                .uri(url.resolve("/actuator/outbox/" + id))
                .contentType(MediaType.APPLICATION_JSON)
                .body(Map.of("action", action))
                .retrieve()
                .body(JsonNode.class);
        return result != null && result.path("applied").asBoolean();
    }

    /**
     * What releasing or skipping rows did, whole or up to a failure.
     *
     * @param applied the rows it released or skipped
     * @param stillParked the rows of the selection still parked when it ended (parked again meanwhile, or beyond those
     *     the endpoint lists)
     * @param failure why it stopped part-way; {@code null} when it went through
     */
    record Acted(int applied, int stillParked, @Nullable RestClientException failure) {}

    /**
     * Releases or skips every parked row of the instance, or those of one key: the parked rows its endpoint lists (the
     * oldest 100), one at a time, then the next ones, each row once, until none is left to act on.
     *
     * @param key the key whose rows are acted on; {@code null}: every row
     */
    Acted actOnEach(URI url, String action, @Nullable String key) {
        Set<UUID> done = new HashSet<>();
        int applied = 0;
        try {
            while (true) {
                JsonNode outbox = this.http
                        .get()
                        .uri(url.resolve("/actuator/outbox"))
                        .retrieve()
                        .body(JsonNode.class);
                List<UUID> parked = outbox == null
                        ? List.of()
                        : outbox.path("parked")
                                .valueStream()
                                .filter(row -> key == null
                                        || key.equals(row.path("key").asString()))
                                .map(row -> UUID.fromString(row.path("id").asString()))
                                .toList();
                List<UUID> next = parked.stream().filter(done::add).toList();
                if (next.isEmpty()) {
                    return new Acted(applied, parked.size(), null);
                }
                for (UUID id : next) {
                    applied += act(url, id, action) ? 1 : 0;
                }
            }
        } catch (RestClientException ex) {
            return new Acted(applied, -1, ex);
        }
    }

    /**
     * When each dead letter the services still wait to see replayed was dead-lettered, by event id (the earliest, where
     * two services dead-lettered the same event): the {@code idempotency} endpoint lists the 500 oldest of each
     * instance. The instances that do not answer are left out.
     */
    Map<UUID, Instant> deadLetteredAt() {
        Map<UUID, Instant> dated = new HashMap<>();
        for (ConsoleProperties.Service service : this.properties.services()) {
            for (URI url : service.instances()) {
                try {
                    get(url, "/actuator/idempotency")
                            .path("deadLetters")
                            .path("oldest")
                            .valueStream()
                            .forEach(waiting -> dated.merge(
                                    UUID.fromString(waiting.path("eventId").asString()),
                                    Instant.parse(waiting.path("deadLetteredAt").asString()),
                                    (a, b) -> a.isBefore(b) ? a : b));
                } catch (RuntimeException ex) {
                    // Unreachable, or an answer without the list (an older library): its dead letters are not dated.
                }
            }
        }
        return dated;
    }

    /**
     * The service whose instance answers at that management URL, when the settings name it: the console acts on those
     * only, whatever a form says.
     */
    Optional<String> serviceAt(URI url) {
        return this.properties.services().stream()
                .filter(service -> service.instances().contains(url))
                .map(ConsoleProperties.Service::name)
                .findFirst();
    }

    /** The instance's last purge, as a line: when, and what it deleted or dropped (or that another instance ran). */
    private static @Nullable String lastPurge(JsonNode purge, boolean partitioned) {
        if (!purge.isObject()) {
            return null;
        }
        String at = purge.path("at").asString();
        if (!purge.path("ran").asBoolean()) {
            return at + ", skipped: another instance purged";
        }
        List<String> dropped = purge.path("partitionsDropped")
                .valueStream()
                .map(JsonNode::asString)
                .toList();
        if (!dropped.isEmpty()) {
            return "%s, partition(s) %s dropped".formatted(at, String.join(", ", dropped));
        }
        return partitioned
                ? at + ", no partition old enough to drop"
                : "%s, %d row(s) deleted"
                        .formatted(at, purge.path("rowsDeleted").asLong());
    }

    private Instance instance(String service, URI url) {
        JsonNode health;
        try {
            health = this.http
                    .get()
                    .uri(url.resolve("/actuator/health"))
                    .retrieve()
                    .body(JsonNode.class);
        } catch (RestClientException ex) {
            // Actuator answers 503 for a status other than UP, with the same body.
            health = ex instanceof org.springframework.web.client.HttpServerErrorException failed
                    ? failed.getResponseBodyAs(JsonNode.class)
                    : null;
            if (health == null) {
                return new Instance(service, url, "UNREACHABLE", null, null, List.of(), null, null, null, reason(ex));
            }
        }
        if (health == null) {
            return new Instance(service, url, "UNREACHABLE", null, null, List.of(), null, null, null, "no answer");
        }
        JsonNode outage = health.path("components").path("idempotency").path("details");
        JsonNode status = get(url, "/actuator/idempotency");
        return new Instance(
                service,
                url,
                health.path("status").asString(),
                outage.has("haltedSince")
                        ? Instant.parse(outage.path("haltedSince").asString())
                        : null,
                text(outage.path("cause")),
                outage.path("guardedBindings")
                        .valueStream()
                        .map(JsonNode::asString)
                        .toList(),
                status == null
                        ? null
                        : new Claims(
                                status.path("table").asString(),
                                status.path("approximateRows").asLong(),
                                duration(status.path("oldestAge")),
                                Duration.parse(status.path("retention").asString()),
                                lastPurge(
                                        status.path("lastPurge"),
                                        status.path("partitioned").asBoolean())),
                status == null || !status.path("deadLetters").isObject()
                        ? null
                        : new DeadLetters(
                                status.path("deadLetters").path("waiting").asLong(),
                                duration(status.path("deadLetters").path("oldestAge")),
                                Duration.parse(status.path("deadLetters")
                                        .path("retention")
                                        .asString())),
                status == null || !status.path("outbox").isObject()
                        ? null
                        : new Outbox(
                                status.path("outbox").path("unpublished").asLong(),
                                Duration.parse(status.path("outbox").path("lag").asString()),
                                status.path("outbox").path("parked").asLong()),
                null);
    }

    private static @Nullable Emitted emitted(JsonNode row) {
        if (row.isMissingNode() || row.isNull()) {
            return null;
        }
        String published = text(row.path("publishedAt"));
        String state = published != null
                ? "published at " + published
                : text(row.path("skippedAt")) != null
                        ? "skipped by an operator: never published"
                        : text(row.path("parkedAt")) != null ? "parked" : "waiting to be published";
        return new Emitted(row.path("eventName").asString(), row.path("key").asString(), state);
    }

    private @Nullable JsonNode get(URI url, String path) {
        try {
            return this.http.get().uri(url.resolve(path)).retrieve().body(JsonNode.class);
        } catch (RestClientException ex) {
            return null;
        }
    }

    private static @Nullable String text(JsonNode node) {
        return node.isMissingNode() || node.isNull() ? null : node.asString();
    }

    private static @Nullable Duration duration(JsonNode node) {
        return node.isMissingNode() || node.isNull() ? null : Duration.parse(node.asString());
    }

    /** Why a server could not be read, for the page: the innermost cause. */
    static String reason(Exception ex) {
        Throwable cause = ex;
        while (cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }
}
