package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The daily partitions of the table in partitioned mode: {@code <table>_pYYYYMMDD} holds the event ids whose UUID v7
 * timestamp falls on that day (UTC), from {@code UuidV7.at(day)} inclusive to {@code UuidV7.at(next day)} exclusive.
 *
 * <p>{@link #maintain()}, at start-up and on a schedule, under a session advisory lock (one instance at a time):
 *
 * <ol>
 *   <li>creates the partitions from the oldest day inside the retention to {@code days-ahead} days after today;
 *   <li>detaches (concurrently, so the guard's inserts never wait) and drops the partitions whose last day is older
 *       than the retention: their ids go in one statement, whatever their number, without deleting rows.
 * </ol>
 *
 * <p>A duplicate is caught whenever it arrives: its id places it in the partition of its first copy. The guard
 * rejects an event id that is not a UUID v7, or whose day has no partition (older than the retention, that is beyond
 * the replay horizon, or further ahead than {@code days-ahead}): no partition could hold it.
 */
public final class ProcessedEventPartitions {

    private static final Logger logger = LoggerFactory.getLogger(ProcessedEventPartitions.class);

    private static final DateTimeFormatter DAY = DateTimeFormatter.BASIC_ISO_DATE;

    private static final String PARTITIONS = """
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass(?) ORDER BY c.relname""";

    private static final String CREATE = """
            CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')""";

    private static final String DETACH = """
            ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY""";

    private static final String DROP = """
            DROP TABLE %s""";

    /**
     * What a maintenance run did.
     *
     * @param created the partitions it created
     * @param dropped the partitions it dropped
     */
    public record Result(List<String> created, List<String> dropped) {}

    private final String tableName;

    private final Duration retention;

    private final int daysAhead;

    private final Clock clock;

    private final Pattern partitionName;

    private final IdempotencyMetrics metrics;

    private final SessionLock lock;

    /**
     * Partition maintenance of your own, for example to run it from a scheduler of the platform.
     *
     * @param dataSource the service's database
     * @param tableName the partitioned table of processed event ids
     * @param retention how long ids are kept
     * @param daysAhead how many days of partitions to keep ahead of today
     */
    public ProcessedEventPartitions(DataSource dataSource, String tableName, Duration retention, int daysAhead) {
        this(dataSource, tableName, retention, daysAhead, Clock.systemUTC(), IdempotencyMetrics.NONE);
    }

    ProcessedEventPartitions(
            DataSource dataSource,
            String tableName,
            Duration retention,
            int daysAhead,
            Clock clock,
            IdempotencyMetrics metrics) {
        this.tableName = tableName;
        this.retention = retention;
        this.daysAhead = daysAhead;
        this.clock = clock;
        this.partitionName = Pattern.compile(Pattern.quote(tableName) + "_p(\\d{8})");
        this.metrics = metrics;
        this.lock = new SessionLock(dataSource, "dev.exactlyonce.idempotency.partitions", tableName);
    }

    /** Creates the partitions the window needs and drops those older than the retention, as of now. */
    public Result maintain() {
        return maintain(this.clock.instant());
    }

    Result maintain(Instant now) {
        long start = System.nanoTime();
        try {
            return this.lock.runIfFree(jdbc -> maintain(jdbc, now, start)).orElseGet(() -> {
                logger.info("Skipped the partition maintenance of {}: another instance is at it", this.tableName);
                return new Result(List.of(), List.of());
            });
        } catch (SQLException ex) {
            throw new IdempotencyException(
                    "Could not maintain the partitions of " + this.tableName + ": " + ex.getMessage(), ex);
        }
    }

    private Result maintain(JdbcTemplate jdbc, Instant now, long start) {
        Result result = new Result(create(jdbc, now), drop(jdbc, now));
        this.metrics.partitionsMaintained(
                result.created().size(), result.dropped().size(), Duration.ofNanos(System.nanoTime() - start));
        logger.info(
                "Partitions of {}: created {}, dropped {} (retention {}, {} day(s) ahead)",
                this.tableName,
                result.created(),
                result.dropped(),
                this.retention,
                this.daysAhead);
        return result;
    }

    /**
     * Rejects an event id no partition can hold: not a UUID v7, or of a day outside the partitions.
     *
     * @throws RejectedMessageException when the id cannot be recorded
     */
    void check(UUID eventId) {
        if (!UuidV7.isV7(eventId)) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    eventId,
                    ("event id %s is not a UUID v7: in partitioned mode (idempotency.partitioning) the id's timestamp"
                                    + " places the event in a daily partition")
                            .formatted(eventId));
        }
        LocalDate day = day(UuidV7.timestamp(eventId));
        Instant now = this.clock.instant();
        if (day.isBefore(oldestDay(now)) || day.isAfter(day(now).plusDays(this.daysAhead))) {
            throw new RejectedMessageException(
                    Reason.INVALID_EVENT_ID,
                    eventId,
                    ("event id %s dates from %s, outside the partitions of %s (%s to %s): older than the retention"
                                    + " (beyond the replay horizon) or too far ahead of this service's clock")
                            .formatted(
                                    eventId, day, this.tableName, oldestDay(now), day(now).plusDays(this.daysAhead)));
        }
    }

    private List<String> create(JdbcTemplate jdbc, Instant now) {
        List<String> existing = jdbc.queryForList(PARTITIONS, String.class, this.tableName);
        List<String> created = new ArrayList<>();
        LocalDate last = day(now).plusDays(this.daysAhead);
        for (LocalDate day = oldestDay(now); !day.isAfter(last); day = day.plusDays(1)) {
            String name = partitionName(day);
            if (!existing.contains(name)) {
                jdbc.execute(CREATE.formatted(name, this.tableName, lowerBound(day), lowerBound(day.plusDays(1))));
                created.add(name);
            }
        }
        return created;
    }

    private List<String> drop(JdbcTemplate jdbc, Instant now) {
        List<String> dropped = new ArrayList<>();
        LocalDate oldest = oldestDay(now);
        for (String name : jdbc.queryForList(PARTITIONS, String.class, this.tableName)) {
            Matcher matcher = this.partitionName.matcher(name);
            if (matcher.matches() && LocalDate.parse(matcher.group(1), DAY).isBefore(oldest)) {
                jdbc.execute(DETACH.formatted(this.tableName, name));
                jdbc.execute(DROP.formatted(name));
                dropped.add(name);
            }
        }
        return dropped;
    }

    /** The oldest day whose ids are kept: the day of {@code now - retention}. */
    private LocalDate oldestDay(Instant now) {
        return day(now.minus(this.retention));
    }

    private String partitionName(LocalDate day) {
        return this.tableName + "_p" + DAY.format(day);
    }

    private static UUID lowerBound(LocalDate day) {
        long millis = day.atStartOfDay(ZoneOffset.UTC).toInstant().toEpochMilli();
        return new UUID(millis << 16, 0L);
    }

    private static LocalDate day(Instant instant) {
        return LocalDate.ofInstant(instant, ZoneOffset.UTC);
    }
}
