package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import dev.exactlyonce.idempotency.outbox.OutboxBacklog;
import dev.exactlyonce.idempotency.outbox.OutboxBacklogQuery;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code idempotency} Actuator endpoint: the table of processed ids, the outbox and dead letters waiting, one
 * event's story ({@link Lookup}) and the purge run now ({@code POST}). See docs/reference.md, "Observability".
 */
@Endpoint(id = "idempotency", defaultAccess = Access.READ_ONLY)
public class IdempotencyEndpoint {

    private static final String OLDEST = """
            SELECT min(processed_at) FROM %s""";

    /**
     * What the endpoint shows; {@code outbox} and {@code deadLetters} are {@code null} where their table is missing.
     *
     * @param approximateRows the database's estimate of the table's rows (exact after the last {@code ANALYZE})
     * @param bytes its size on disk, indexes and partitions included
     * @param lastPurge this instance's last purge (or maintenance of the partitions); {@code null} before its first
     */
    public record Status(
            String table,
            long approximateRows,
            long bytes,
            @Nullable Instant oldestProcessedAt,
            @Nullable Duration oldestAge,
            Duration retention,
            Duration replayHorizon,
            boolean partitioned,
            @Nullable OutboxBacklog outbox,
            @Nullable DeadLetters deadLetters,
            @Nullable LastPurge lastPurge) {}

    /**
     * A purge of old ids this instance ran, ended {@code at}; {@code ran} is {@code false} when another instance was at
     * it. On a partitioned table it deletes no rows ({@code rowsDeleted} 0) and drops whole partitions instead.
     */
    public record LastPurge(Instant at, boolean ran, long rowsDeleted, List<String> partitionsDropped) {}

    /**
     * The dead letters still waiting to be replayed (one discarded from its queue counts until its retention, past
     * which a replay is refused), and the {@value #OLDEST_LISTED} that have waited longest, oldest first.
     */
    public record DeadLetters(
            long waiting,
            @Nullable Instant oldestDeadLetteredAt,
            @Nullable Duration oldestAge,
            Duration retention,
            List<Waiting> oldest) {}

    /** The most dead letters still waiting the endpoint lists. */
    public static final int OLDEST_LISTED = 500;

    /** A dead letter still waiting to be replayed, and when the guard dead-lettered it. */
    public record Waiting(UUID eventId, Instant deadLetteredAt) {}

    /**
     * What the service knows of one event ("was it applied here?"): its claims, the dead letters the guard recorded of
     * it, and its row in this service's outbox; empty when none of its rows is here, or kept.
     */
    public record Lookup(
            UUID eventId,
            List<Claim> claims,
            List<DeadLetter> deadLetters,
            @Nullable Emitted emitted) {}

    /** A claim of the event, under a scope ({@code ""}: the service's, the default key scope) and a name. */
    public record Claim(String scope, String eventName, Instant processedAt) {}

    /** A dead letter of the event the guard recorded, so that a replay of it is taken back ({@code takenBackAt}). */
    public record DeadLetter(
            String binding,
            String eventName,
            Instant deadLetteredAt,
            @Nullable Instant takenBackAt) {}

    /** The event as this service emitted it, in its outbox; its {@code key} is the outbox's {@code aggregateid}. */
    public record Emitted(
            String eventName,
            String key,
            Instant occurredAt,
            @Nullable Instant publishedAt,
            int attempts,
            @Nullable Instant parkedAt,
            @Nullable Instant skippedAt) {}

    private static final String CLAIMS = """
            SELECT scope, event_name, processed_at FROM %s WHERE event_id = ? ORDER BY processed_at""";

    private static final String DEAD_LETTERS = """
            SELECT binding, event_name, dead_lettered_at, taken_back_at FROM %s WHERE event_id = ?
            ORDER BY dead_lettered_at""";

    private static final String EMITTED = """
            SELECT type, aggregateid, occurred_at, published_at, attempts, parked_at, skipped_at
            FROM outbox_event WHERE id = ?""";

    private final DataSource dataSource;

    private final JdbcTemplate jdbcTemplate;

    private final IdempotencyProperties properties;

    private final OutboxBacklogQuery outbox;

    private final @Nullable ProcessedEventPurge purge;

    private final @Nullable ProcessedEventPartitions partitions;

    public IdempotencyEndpoint(DataSource dataSource, IdempotencyProperties properties) {
        this(dataSource, properties, null, null);
    }

    /** The purge is {@code null} when the table is partitioned, and the partitions' maintenance when it is not. */
    public IdempotencyEndpoint(
            DataSource dataSource,
            IdempotencyProperties properties,
            @Nullable ProcessedEventPurge purge,
            @Nullable ProcessedEventPartitions partitions) {
        this.dataSource = dataSource;
        this.jdbcTemplate = new JdbcTemplate(dataSource);
        this.properties = properties;
        this.outbox = new OutboxBacklogQuery(dataSource);
        this.purge = purge;
        this.partitions = partitions;
    }

    @ReadOperation
    public Status status() {
        String table = this.properties.tableName();
        Dialect.TableSize size = Dialect.of(this.dataSource).tableSize(this.jdbcTemplate, table);
        Timestamp oldest = this.jdbcTemplate.queryForObject(OLDEST.formatted(table), Timestamp.class);
        Instant oldestProcessedAt = oldest != null ? oldest.toInstant() : null;
        return new Status(
                table,
                size.rows(),
                size.bytes(),
                oldestProcessedAt,
                oldestProcessedAt != null ? Duration.between(oldestProcessedAt, Instant.now()) : null,
                this.properties.retention(),
                this.properties.replayHorizon().total(),
                this.properties.partitioning().enabled(),
                this.outbox.read(),
                deadLetters(),
                lastPurge());
    }

    /** Runs the purge now (in partitioned mode, there is none: old partitions are dropped). */
    @WriteOperation
    public ProcessedEventPurge.@Nullable Result purge() {
        return this.purge != null ? this.purge.purge() : null;
    }

    private @Nullable LastPurge lastPurge() {
        ProcessedEventPurge.Run purged = this.purge != null ? this.purge.lastRun() : null;
        if (purged != null) {
            return new LastPurge(
                    purged.at(), purged.result().ran(), purged.result().rows(), List.of());
        }
        ProcessedEventPartitions.Run maintained = this.partitions != null ? this.partitions.lastRun() : null;
        return maintained == null
                ? null
                : new LastPurge(
                        maintained.at(),
                        maintained.ran(),
                        0,
                        maintained.result().dropped());
    }

    /** What the service knows of the event of that id. */
    @ReadOperation
    public Lookup lookup(@Selector UUID eventId) {
        String table = this.properties.tableName();
        List<Claim> claims = this.jdbcTemplate.query(
                CLAIMS.formatted(table),
                (row, i) -> new Claim(
                        row.getString(1), row.getString(2), row.getTimestamp(3).toInstant()),
                eventId);
        String deadLetterTable = DeadLetterRecords.tableOf(table);
        List<DeadLetter> deadLetters = TableName.exists(this.jdbcTemplate, deadLetterTable)
                ? this.jdbcTemplate.query(
                        DEAD_LETTERS.formatted(deadLetterTable),
                        (row, i) -> new DeadLetter(
                                row.getString(1),
                                row.getString(2),
                                row.getTimestamp(3).toInstant(),
                                instant(row.getTimestamp(4))),
                        eventId)
                : List.of();
        List<Emitted> emitted = TableName.exists(this.jdbcTemplate, "outbox_event")
                ? this.jdbcTemplate.query(
                        EMITTED,
                        (row, i) -> new Emitted(
                                row.getString(1),
                                row.getString(2),
                                row.getTimestamp(3).toInstant(),
                                instant(row.getTimestamp(4)),
                                row.getInt(5),
                                instant(row.getTimestamp(6)),
                                instant(row.getTimestamp(7))),
                        eventId)
                : List.of();
        return new Lookup(eventId, claims, deadLetters, emitted.isEmpty() ? null : emitted.get(0));
    }

    private static @Nullable Instant instant(@Nullable Timestamp timestamp) {
        return timestamp != null ? timestamp.toInstant() : null;
    }

    private @Nullable DeadLetters deadLetters() {
        if (!TableName.exists(this.jdbcTemplate, DeadLetterRecords.tableOf(this.properties.tableName()))) {
            return null;
        }
        Duration retention = this.properties.replayHorizon().deadLetterRetention();
        DeadLetterRecords records =
                Dialect.of(this.dataSource).deadLetters(this.jdbcTemplate, this.properties.tableName(), retention);
        DeadLetterRecords.Waiting waiting = records.waiting();
        Instant oldest = waiting.oldest();
        return new DeadLetters(
                waiting.count(),
                oldest,
                oldest != null ? Duration.between(oldest, Instant.now()) : null,
                retention,
                waiting.count() == 0
                        ? List.of()
                        : records.oldestWaiting(OLDEST_LISTED).stream()
                                .map(one -> new Waiting(one.eventId(), one.deadLetteredAt()))
                                .toList());
    }
}
