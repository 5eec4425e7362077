package dev.exactlyonce.idempotency.retention;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.SessionLock;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The daily partitions of the table in partitioned mode ({@code <table>_pYYYYMMDD}: the UUID v7 ids of a UTC day),
 * maintained without making a claim wait: each is created as a plain table, then attached; those past the retention are
 * detached concurrently and dropped; what an interrupted run left is finished. See docs/operations.md, "Retention,
 * purge and partitions".
 */
public final class ProcessedEventPartitions {

    private static final Logger logger = LoggerFactory.getLogger(ProcessedEventPartitions.class);

    private static final DateTimeFormatter DAY = DateTimeFormatter.BASIC_ISO_DATE;

    /** The maintenance session's {@code lock_timeout}: what times out is done by the next run. */
    static final long LOCK_TIMEOUT_MS = 5_000;

    /** The tables named {@code <table>_pYYYYMMDD} in the table's schema, attached or not. */
    private static final String DAILY_TABLES = """
            SELECT c.relname, i.inhrelid IS NOT NULL AS attached, coalesce(i.inhdetachpending, false) AS pending
            FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = to_regclass(?)
            WHERE c.relkind = 'r' AND c.relname ~ ?
              AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass(?))
            ORDER BY c.relname""";

    private static final String SET_LOCK_TIMEOUT = """
            SET lock_timeout = %d""";

    private static final String RESET_LOCK_TIMEOUT = """
            RESET lock_timeout""";

    private static final String CREATE = """
            CREATE TABLE IF NOT EXISTS %s (LIKE %s INCLUDING DEFAULTS INCLUDING INDEXES)""";

    private static final String ATTACH = """
            ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')""";

    private static final String DETACH = """
            ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY""";

    private static final String FINALIZE = """
            ALTER TABLE %s DETACH PARTITION %s FINALIZE""";

    private static final String DROP = """
            DROP TABLE %s""";

    private record DailyTable(String name, LocalDate day, boolean attached, boolean pendingDetach) {}

    /** What a maintenance run did: the partitions it created and those it dropped. */
    public record Result(List<String> created, List<String> dropped) {}

    /** A run of this instance, and when it ended; {@code ran} is {@code false} when another instance was at it. */
    public record Run(Instant at, boolean ran, Result result) {}

    private final String tableName;

    private final Duration retention;

    private final int daysAhead;

    private final Clock clock;

    private final Pattern partitionName;

    private final IdempotencyMetrics metrics;

    private final SessionLock lock;

    private volatile @Nullable Run lastRun;

    /** Maintenance of your own, for a scheduler of the platform; {@code daysAhead}: days of partitions after today. */
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

    /** This instance's last run, {@code null} before its first. */
    public @Nullable Run lastRun() {
        return this.lastRun;
    }

    /** Runs the maintenance now, unless another instance is at it (a session lock). */
    public Result maintain() {
        return maintain(this.clock.instant());
    }

    Result maintain(Instant now) {
        long start = System.nanoTime();
        try {
            Optional<Result> ran = this.lock.runIfFree(jdbc -> maintain(jdbc, now, start));
            if (ran.isEmpty()) {
                logger.info("Skipped the partition maintenance of {}: another instance is at it", this.tableName);
            }
            Result result = ran.orElseGet(() -> new Result(List.of(), List.of()));
            this.lastRun = new Run(Instant.now(), ran.isPresent(), result);
            return result;
        } catch (SQLException ex) {
            throw new IdempotencyException(
                    "Could not maintain the partitions of " + this.tableName + ": " + ex.getMessage(), ex);
        }
    }

    private Result maintain(JdbcTemplate jdbc, Instant now, long start) {
        jdbc.execute(SET_LOCK_TIMEOUT.formatted(LOCK_TIMEOUT_MS));
        Result result;
        try {
            result = new Result(create(jdbc, now), drop(jdbc, now));
        } finally {
            jdbc.execute(RESET_LOCK_TIMEOUT);
        }
        this.metrics.partitionsMaintained(
                result.created().size(), result.dropped().size(), Duration.ofNanos(System.nanoTime() - start));
        // The oldest partition kept: its first day is the oldest id's time, for the alert on drops that fall behind.
        this.metrics.processedIdsKept(
                dailyTables(jdbc).stream()
                        .filter(table -> !result.dropped().contains(table.name()))
                        .map(DailyTable::day)
                        .min(LocalDate::compareTo)
                        .map(day -> day.atStartOfDay(ZoneOffset.UTC).toInstant())
                        .orElse(null),
                this.retention);
        logger.info(
                "Partitions of {}: created {}, dropped {} (retention {}, {} day(s) ahead)",
                this.tableName,
                result.created(),
                result.dropped(),
                this.retention,
                this.daysAhead);
        return result;
    }

    /** @throws RejectedMessageException for an id no partition can hold: not a UUID v7, or of a day outside them */
    public void check(UUID eventId) {
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
        Map<LocalDate, DailyTable> existing = new HashMap<>();
        dailyTables(jdbc).forEach(table -> existing.put(table.day(), table));
        List<String> created = new ArrayList<>();
        LocalDate last = day(now).plusDays(this.daysAhead);
        for (LocalDate day = oldestDay(now); !day.isAfter(last); day = day.plusDays(1)) {
            DailyTable table = existing.get(day);
            if (table == null || !table.attached()) {
                String name = partitionName(day);
                try {
                    jdbc.execute(CREATE.formatted(name, this.tableName));
                    jdbc.execute(ATTACH.formatted(this.tableName, name, lowerBound(day), lowerBound(day.plusDays(1))));
                    created.add(name);
                } catch (DataAccessException ex) {
                    logger.warn(
                            "Could not attach partition {} to {} now ({}); the next run attaches it",
                            name,
                            this.tableName,
                            ex.getMostSpecificCause().getMessage());
                }
            }
        }
        return created;
    }

    private List<String> drop(JdbcTemplate jdbc, Instant now) {
        List<String> dropped = new ArrayList<>();
        LocalDate oldest = oldestDay(now);
        for (DailyTable table : dailyTables(jdbc)) {
            if (!table.day().isBefore(oldest)) {
                continue;
            }
            try {
                if (table.pendingDetach()) {
                    jdbc.execute(FINALIZE.formatted(this.tableName, table.name()));
                } else if (table.attached()) {
                    jdbc.execute(DETACH.formatted(this.tableName, table.name()));
                }
                jdbc.execute(DROP.formatted(table.name()));
                dropped.add(table.name());
            } catch (DataAccessException ex) {
                logger.warn(
                        "Could not drop partition {} of {} now ({}); the next run drops it",
                        table.name(),
                        this.tableName,
                        ex.getMostSpecificCause().getMessage());
            }
        }
        return dropped;
    }

    private List<DailyTable> dailyTables(JdbcTemplate jdbc) {
        List<DailyTable> tables = new ArrayList<>();
        jdbc.query(
                DAILY_TABLES,
                row -> {
                    Matcher matcher = this.partitionName.matcher(row.getString(1));
                    try {
                        if (matcher.matches()) {
                            tables.add(new DailyTable(
                                    row.getString(1),
                                    LocalDate.parse(matcher.group(1), DAY),
                                    row.getBoolean(2),
                                    row.getBoolean(3)));
                        }
                    } catch (DateTimeParseException ex) {
                        // Not a day: not one of ours.
                    }
                },
                this.tableName,
                "^" + this.tableName + "_p[0-9]{8}$",
                this.tableName);
        return tables;
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
