package dev.exactlyonce.idempotency;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * Configuration of the idempotency guard, under the {@code idempotency} prefix. See docs/reference.md, "Configuration".
 *
 * @param tableName Table of processed event ids. A lower-case SQL identifier of at most 46 characters, not reserved.
 * @param migrateWithFlyway Whether the library migrates its tables with Flyway when the service uses Flyway. Set to
 *     false to create them from the jar's dev/exactlyonce/idempotency/schema-*.sql scripts.
 * @param eventId Where the guard reads each message's event id.
 * @param keyScope What an event is recorded as processed for: the whole service (service), or each function composed
 *     after the guard (function). It names each binding's scope by default: the empty string, or the functions.
 * @param retention How long a processed id is kept; a later copy is processed again. It must cover the replay horizon.
 * @param replayHorizon How late a copy of an event can still arrive.
 * @param purge The scheduled purges of old ids and of published outbox rows.
 * @param partitioning The opt-in range-partitioned table, whose old ids go with whole partitions.
 * @param outage What the guarded bindings do while the database (or another dependency) is unavailable.
 * @param conflicts What the guarded bindings do with a message whose attempts conflict with other transactions.
 * @param endpoint The idempotency Actuator endpoint.
 * @param batch How guarded batch bindings (batch-mode) gather their batches.
 * @param payload What a message may cost to read (its size, the digits of its decimals) before it is rejected.
 * @param bindings Each guarded binding, by name (idempotencyGuardreserveStock-in-0): its scope, former scopes, routes.
 * @param retiredScopes Scopes whose claims are given up on purpose: their events are processed again if a copy
 *     arrives. Start-up refuses a scope with claims that no binding uses, takes over or retires.
 */
@ConfigurationProperties("idempotency")
public record IdempotencyProperties(
        @DefaultValue("processed_event") String tableName,
        @DefaultValue("true") boolean migrateWithFlyway,
        @DefaultValue EventId eventId,
        @DefaultValue("service") KeyScope keyScope,
        @DefaultValue("30d") Duration retention,
        @DefaultValue ReplayHorizon replayHorizon,
        @DefaultValue Purge purge,
        @DefaultValue Partitioning partitioning,
        @DefaultValue Outage outage,
        @DefaultValue Conflicts conflicts,
        @DefaultValue Endpoint endpoint,
        @DefaultValue Batch batch,
        @DefaultValue Payload payload,
        @Nullable Map<String, Binding> bindings,
        @Nullable List<String> retiredScopes) {

    public IdempotencyProperties {
        TableNameCheck.check(tableName);
        bindings = bindings != null ? Map.copyOf(bindings) : Map.of();
        retiredScopes = retiredScopes != null ? List.copyOf(retiredScopes) : List.of();
        if (retention.compareTo(replayHorizon.total()) < 0) {
            throw new IllegalArgumentException(("idempotency.retention (%s) is shorter than the replay horizon (%s: %s"
                            + " of producer replay + %s of dead-letter retention): a copy of an event replayed or"
                            + " taken out of the dead-letter queue after %s would be applied a second time. Keep"
                            + " processed ids at least %s (idempotency.retention), or declare a shorter horizon"
                            + " (idempotency.replay-horizon.*) if producers really cannot replay that far back")
                    .formatted(
                            retention,
                            replayHorizon.total(),
                            replayHorizon.producerReplay(),
                            replayHorizon.deadLetterRetention(),
                            retention,
                            replayHorizon.total()));
        }
    }

    @Override
    public Map<String, Binding> bindings() {
        return this.bindings;
    }

    @Override
    public List<String> retiredScopes() {
        return this.retiredScopes;
    }

    /**
     * A guarded binding's identity in the table, under {@code idempotency.bindings.<binding>}.
     *
     * @param scope The scope its claims are recorded under, by default key-scope's. Name it to keep it through renames.
     * @param formerScopes Scopes whose claims are copied to this binding's scope at start-up: its scope before a
     *     rename, or before key-scope changed ("" for the service's).
     * @param routes The event names each route (routing key or topic) may carry besides its own name, where routes
     *     are not event names. A routing key with dots goes in brackets.
     */
    public record Binding(
            @Nullable String scope,
            @Nullable List<String> formerScopes,
            @Nullable Map<String, List<String>> routes) {

        public Binding {
            formerScopes = formerScopes != null ? List.copyOf(formerScopes) : List.of();
            routes = routes != null ? Map.copyOf(routes) : Map.of();
        }

        @Override
        public Map<String, List<String>> routes() {
            return this.routes;
        }

        @Override
        public List<String> formerScopes() {
            return this.formerScopes;
        }
    }

    /**
     * @param producerReplay How far back producers can replay their events (their outbox's retention).
     * @param deadLetterRetention How long a message can stay in the dead-letter queue before it is replayed.
     */
    public record ReplayHorizon(
            @DefaultValue("7d") Duration producerReplay,
            @DefaultValue("14d") Duration deadLetterRetention) {

        /** The whole horizon. */
        public Duration total() {
            return this.producerReplay.plus(this.deadLetterRetention);
        }
    }

    /**
     * @param enabled Whether old ids and published outbox rows are purged on a schedule. Turned off, they are kept
     *     forever, but partition maintenance still drops old ids.
     * @param interval The time between two runs of each purge, and of the partition maintenance.
     * @param initialDelay The time before the first run of each purge. The partition maintenance runs at start-up.
     * @param batchSize The rows each short transaction of a purge deletes.
     */
    public record Purge(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("1h") Duration interval,
            @DefaultValue("1m") Duration initialDelay,
            @DefaultValue("5000") int batchSize) {

        public Purge {
            if (batchSize < 1) {
                throw new IllegalArgumentException("idempotency.purge.batch-size must be at least 1");
            }
        }
    }

    /**
     * The range-partitioned table, under {@code idempotency.partitioning}: one partition a day, dropped whole once
     * older than the retention. See docs/operations.md, "Retention, purge and partitions".
     *
     * @param enabled Whether the table is partitioned.
     * @param daysAhead How many days of partitions exist ahead of today.
     */
    public record Partitioning(
            @DefaultValue("false") boolean enabled,
            @DefaultValue("3") int daysAhead) {

        public Partitioning {
            if (daysAhead < 1) {
                throw new IllegalArgumentException("idempotency.partitioning.days-ahead must be at least 1");
            }
        }
    }

    /**
     * Gone settings, kept only to refuse them rather than ignore them. See docs/reference.md, "Upgrade notes".
     *
     * @param purgeEnabled Gone: set management.endpoint.idempotency.access=unrestricted instead.
     * @param outboxWriteEnabled Gone: set management.endpoint.outbox.access=unrestricted instead.
     */
    public record Endpoint(
            @Nullable Boolean purgeEnabled, @Nullable Boolean outboxWriteEnabled) {

        public Endpoint {
            if (purgeEnabled != null) {
                throw new IllegalArgumentException("idempotency.endpoint.purge-enabled is gone: the idempotency"
                        + " endpoint's purge answers where management.endpoint.idempotency.access is unrestricted"
                        + " (read-only by default)");
            }
            if (outboxWriteEnabled != null) {
                throw new IllegalArgumentException("idempotency.endpoint.outbox-write-enabled is gone: the outbox"
                        + " endpoint's release and skip answer where management.endpoint.outbox.access is unrestricted"
                        + " (read-only by default)");
            }
        }
    }

    /**
     * @param maxWait The longest a batch waits for more messages before it is handed on. 0 leaves the listener
     *     containers' own settings.
     */
    public record Batch(@DefaultValue("10ms") Duration maxWait) {

        public Batch {
            if (maxWait.isNegative()) {
                throw new IllegalArgumentException("idempotency.batch.max-wait must not be negative");
            }
        }
    }

    /**
     * What a guarded message may cost to read, under {@code idempotency.payload}: beyond either bound it is rejected
     * ({@code INVALID_PAYLOAD}) before it is parsed.
     *
     * @param maxSize The largest message body read. Keep it at or under the broker's own bound, which bounds what a
     *     consumer holds in memory.
     * @param maxDecimalDigits The most digits of a JSON number anywhere in the body, and the largest exponent of one
     *     mapped to a BigDecimal or Number field. Elsewhere in the body an exponent may reach ten times this.
     */
    public record Payload(
            @DefaultValue("4MB") DataSize maxSize,
            @DefaultValue("100") int maxDecimalDigits) {

        public Payload {
            if (maxSize.toBytes() <= 0 || maxDecimalDigits <= 0) {
                throw new IllegalArgumentException(
                        "idempotency.payload.max-size and idempotency.payload.max-decimal-digits must be positive");
            }
        }

        /** These bounds, as the codec takes them. */
        public EnvelopeCodec.Limits limits() {
            return new EnvelopeCodec.Limits(this.maxSize.toBytes(), this.maxDecimalDigits);
        }
    }

    /**
     * What the guarded bindings do with a message that conflicted with another transaction, under
     * {@code idempotency.conflicts}: held, tried again, then given back. See docs/operations.md, "Runbook".
     *
     * @param maxGiveBacks How many times a message that conflicted is held and tried again. After that it fails as any
     *     message does.
     * @param firstHold The first hold before a message that conflicted is tried again; it doubles each time.
     * @param longestHold The longest hold before a message that conflicted is tried again.
     */
    public record Conflicts(
            @DefaultValue("10") int maxGiveBacks,
            @DefaultValue("200ms") Duration firstHold,
            @DefaultValue("5s") Duration longestHold) {

        public Conflicts {
            if (maxGiveBacks < 0) {
                throw new IllegalArgumentException("idempotency.conflicts.max-give-backs must not be negative");
            }
            if (firstHold.isNegative() || firstHold.isZero() || longestHold.compareTo(firstHold) < 0) {
                throw new IllegalArgumentException(
                        "idempotency.conflicts.first-hold must be positive, and longest-hold at least as long, but"
                                + " they are %s and %s".formatted(firstHold, longestHold));
            }
        }
    }

    /**
     * What the guarded bindings do while the database, or another dependency declared as such, is unavailable, under
     * {@code idempotency.outage}. See docs/operations.md, "When things go wrong".
     *
     * @param probeInitialInterval The first wait before probing the database.
     * @param probeMaxInterval The longest wait between two probes. Processing resumes within about this long after the
     *     database answers.
     * @param maxHold How long a consumer thread holds a message before it gives it back to the broker. Keep it within
     *     RabbitMQ's consumer timeout (30 minutes) and Kafka's max.poll.interval.ms.
     * @param startupWait How long start-up waits for the database before it fails (0s: fail at once).
     * @param socketTimeout How long the guard's and the probe's statements wait for the database's answer, and the
     *     bound of the transaction on the server (0s: none). Keep it above the longest statement.
     * @param exceptions Further failures that mean a dependency is down, not that the message is wrong (a payment
     *     provider's 503). One in a failure's causes halts consumption as a database outage does.
     */
    public record Outage(
            @DefaultValue("1s") Duration probeInitialInterval,
            @DefaultValue("5s") Duration probeMaxInterval,
            @DefaultValue("4m") Duration maxHold,
            @DefaultValue("5m") Duration startupWait,
            @DefaultValue("30s") Duration socketTimeout,
            @Nullable List<Class<? extends Throwable>> exceptions) {

        public Outage {
            exceptions = exceptions != null ? List.copyOf(exceptions) : List.of();
            if (probeInitialInterval.isNegative()
                    || probeInitialInterval.isZero()
                    || probeMaxInterval.compareTo(probeInitialInterval) < 0) {
                throw new IllegalArgumentException("idempotency.outage.probe-initial-interval must be positive and no"
                        + " longer than idempotency.outage.probe-max-interval");
            }
            if (socketTimeout.isNegative()) {
                throw new IllegalArgumentException(
                        "idempotency.outage.socket-timeout must be 0 (no limit) or positive, not " + socketTimeout);
            }
        }

        @Override
        public List<Class<? extends Throwable>> exceptions() {
            return this.exceptions;
        }
    }

    /**
     * @param source Where the id, name and time come from. With any source but envelope the body is the bare payload.
     * @param header The header that carries the id when source is header.
     * @param whenMissing What to do with a message without an event id: reject it, or pass it through unguarded (a
     *     copy would apply twice). An envelope without event_id is always rejected.
     * @param routeCheck Whether an event whose name is not the routing key or topic it arrived by is rejected. Turn it
     *     off only where routing keys are not event names (a fanout exchange).
     */
    public record EventId(
            @DefaultValue("envelope") EventIdSource source,
            @DefaultValue("event_id") String header,
            @DefaultValue("reject") MissingEventId whenMissing,
            @DefaultValue("true") boolean routeCheck) {}

    /** What an event is recorded as processed for. */
    public enum KeyScope {
        /** The service: the key is the event id. */
        SERVICE,
        /** Each function: the key is the event id and the function. */
        FUNCTION
    }

    /** Where a message's event id comes from. */
    public enum EventIdSource {
        /** The JSON envelope's {@code event_id}, {@code event_name}, {@code occurred_at} and {@code payload}. */
        ENVELOPE,
        /**
         * The header named by {@code idempotency.event-id.header}; the name from the {@code event_name} header or the
         * routing key; the time from the {@code occurred_at} header, if any.
         */
        HEADER,
        /** The AMQP {@code message_id} property; the name and time as for {@link #HEADER}. */
        MESSAGE_ID,
        /** CloudEvents binary mode: {@code ce_id}, {@code ce_type}, {@code ce_time}, as each binder spells them. */
        CLOUDEVENTS
    }

    /** What to do with a message that carries no event id. */
    public enum MissingEventId {
        /** Reject it to the dead-letter queue, without retry. */
        REJECT,
        /** Let it through to the business function, in the transaction but with no claim. */
        PASS_THROUGH
    }
}
