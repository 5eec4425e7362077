package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import dev.exactlyonce.idempotency.outbox.OutboxBacklog;
import dev.exactlyonce.idempotency.outbox.OutboxBacklogQuery;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The {@code idempotency} Actuator endpoint: how big the table of processed event ids is (the planner's estimate, and
 * its size on disk), how old its oldest row is, the retention that bounds it, and what waits in the outbox. It only reads: the purge, which
 * deletes rows, is an operation of {@link PurgingIdempotencyEndpoint}, registered in its place when
 * {@code idempotency.endpoint.purge-enabled} is true.
 */
@Endpoint(id = "idempotency")
public class IdempotencyEndpoint {

    private static final String OLDEST = """
            SELECT min(processed_at) FROM %s""";

    /**
     * What the endpoint shows.
     *
     * @param table the table of processed event ids
     * @param approximateRows the database's estimate of its rows (exact after the last {@code ANALYZE})
     * @param bytes its size on disk, indexes and partitions included
     * @param oldestProcessedAt when its oldest row was written, if it has rows
     * @param oldestAge how old that row is
     * @param retention how long ids are kept
     * @param replayHorizon how late a copy can arrive, which the retention covers
     * @param partitioned whether the table is range-partitioned (old ids then go with whole partitions)
     * @param outbox what waits in the outbox, when the schema has one
     * @param deadLetters the dead letters still waiting to be replayed, when the schema records them
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
            @Nullable DeadLetters deadLetters) {}

    /**
     * The dead letters still waiting to be replayed: recorded by the guard within their retention, no replay of them
     * applied (a dead letter discarded from its queue is counted until it is older than the retention).
     *
     * @param waiting how many
     * @param oldestDeadLetteredAt when the oldest was dead-lettered, if one waits
     * @param oldestAge how long it has waited
     * @param retention how long a dead letter can wait: a replay of an older one is refused
     *     ({@code idempotency.replay-horizon.dead-letter-retention})
     */
    public record DeadLetters(
            long waiting,
            @Nullable Instant oldestDeadLetteredAt,
            @Nullable Duration oldestAge,
            Duration retention) {}

    private final DataSource dataSource;

    private final JdbcTemplate jdbcTemplate;

    private final IdempotencyProperties properties;

    private final OutboxBacklogQuery outbox;

    public IdempotencyEndpoint(DataSource dataSource, IdempotencyProperties properties) {
        this.dataSource = dataSource;
        this.jdbcTemplate = new JdbcTemplate(dataSource);
        this.properties = properties;
        this.outbox = new OutboxBacklogQuery(dataSource);
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
                deadLetters());
    }

    private @Nullable DeadLetters deadLetters() {
        if (!TableName.exists(this.jdbcTemplate, DeadLetterRecords.tableOf(this.properties.tableName()))) {
            return null;
        }
        Duration retention = this.properties.replayHorizon().deadLetterRetention();
        DeadLetterRecords.Waiting waiting = Dialect.of(this.dataSource)
                .deadLetters(this.jdbcTemplate, this.properties.tableName(), retention)
                .waiting();
        Instant oldest = waiting.oldest();
        return new DeadLetters(
                waiting.count(), oldest, oldest != null ? Duration.between(oldest, Instant.now()) : null, retention);
    }
}
