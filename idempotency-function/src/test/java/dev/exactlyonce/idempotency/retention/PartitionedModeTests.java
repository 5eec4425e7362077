package dev.exactlyonce.idempotency.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.schema.IdempotencyDatabaseInitializerDetector;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.Pause;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Partitioned mode: the table is range-partitioned by the UUID v7 event id, one partition a day, created ahead of
 * time, dropped whole once older than the retention (30 days).
 *
 * <p>The tests that go through the guard use the service's table, {@code processed_event}; the one that changes its
 * partitions owns a day of its own (the last day ahead) and puts it back. The maintenance tests work on tables of
 * their own.
 */
@SpringBootTest(properties = {"idempotency.partitioning.enabled=true", "idempotency.partitioning.days-ahead=2"})
@EnableIdempotencyTestKit
class PartitionedModeTests {

    private static final String PARTITIONS = """
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'processed_event'::regclass ORDER BY c.relname""";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("partitioned").registerDataSource(registry);
    }

    @Autowired
    ProcessedEventPartitions partitions;

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    BusinessFunctionProbe probe;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Autowired
    DataSource dataSource;

    @Autowired
    ConsumptionHalt outage;

    private static final AtomicInteger TABLES = new AtomicInteger();

    @AfterEach
    void reset() {
        this.probe.reset();
        this.deliveries.resetLastError();
    }

    @Test
    void partitionsCoverTheRetentionAndTheDaysAheadFromStartUp() {
        LocalDate today = LocalDate.now(ZoneOffset.UTC);

        // Made at start-up, which may have been the day before, if midnight (UTC) passed since.
        assertThat(this.jdbcTemplate.queryForList(PARTITIONS, String.class))
                .isIn(window(today), window(today.minusDays(1)));
    }

    /** The partitions of the retention (30 days) and of two days ahead, seen from that day. */
    private static List<String> window(LocalDate day) {
        return IntStream.rangeClosed(-30, 2)
                .mapToObj(offset -> partition(day.plusDays(offset)))
                .toList();
    }

    /**
     * The partitions are made as their bean is created, on the table the library's migration creates: Spring Boot
     * orders them (the migration is a database initializer, after the service's Flyway; the partitions depend on
     * database initialization), as the start-up of this fresh database shows.
     */
    @Test
    void theLibrarysMigrationRunsAfterTheServicesAndThePartitionsAfterIt(
            @Autowired ConfigurableListableBeanFactory beanFactory) {
        assertThat(beanFactory
                        .getBeanDefinition(IdempotencyDatabaseInitializerDetector.MIGRATION_BEAN)
                        .getDependsOn())
                .contains("flywayInitializer");
        assertThat(beanFactory.getBeanDefinition("idempotencyPartitions").getDependsOn())
                .contains(IdempotencyDatabaseInitializerDetector.MIGRATION_BEAN, "flywayInitializer");
    }

    @Test
    void aDuplicateArrivingAfterMidnightIsCaughtInThePartitionOfItsFirstCopy() {
        LocalDate yesterday = LocalDate.now(ZoneOffset.UTC).minusDays(1);
        Instant lastMillisecond =
                yesterday.plusDays(1).atStartOfDay(ZoneOffset.UTC).toInstant().minusMillis(1);
        EventEnvelope<ThingHappened> lateEvening = event(UuidV7.at(lastMillisecond));
        EventEnvelope<ThingHappened> midnight = event(UuidV7.at(lastMillisecond.plusMillis(1)));

        this.deliveries.deliver(lateEvening);
        this.deliveries.deliver(midnight);
        this.deliveries.deliver(lateEvening);
        this.deliveries.deliver(midnight);

        assertThat(partitionOf(lateEvening)).isEqualTo(partition(yesterday));
        assertThat(partitionOf(midnight)).isEqualTo(partition(yesterday.plusDays(1)));
        assertThat(this.probe.invocations("recordThing")).isEqualTo(2);
    }

    @Test
    void anEventIdThatIsNotAUuidV7IsRejected() {
        EventEnvelope<ThingHappened> random = event(UUID.randomUUID());

        this.deliveries.deliver(random);

        assertThat(this.probe.invocations("recordThing")).isZero();
        assertThat(((ErrorMessage) this.deliveries.lastError())
                        .getPayload()
                        .getCause()
                        .getMessage())
                .startsWith("INVALID_EVENT_ID: event id " + random.eventId() + " is not a UUID v7");
    }

    @Test
    void anEventIdOlderThanTheRetentionIsRejected() {
        EventEnvelope<ThingHappened> beyond = event(UuidV7.at(Instant.now().minus(Duration.ofDays(40))));

        this.deliveries.deliver(beyond);

        assertThat(this.probe.invocations("recordThing")).isZero();
        assertThat(((ErrorMessage) this.deliveries.lastError())
                        .getPayload()
                        .getCause()
                        .getMessage())
                .contains("older than the retention (beyond the replay horizon)");
    }

    @Test
    void maintenanceThatCreatesAPartitionWhileATransactionHoldsAClaimLetsTheNextClaimsThrough() throws Exception {
        // The last partition made ahead (two days from start-up, whatever the day is now).
        List<String> attached = this.jdbcTemplate.queryForList(PARTITIONS, String.class);
        String lastDay = attached.get(attached.size() - 1);
        this.jdbcTemplate.execute("DROP TABLE " + lastDay);
        Pause held = this.probe.pauseNext("recordThing");
        CompletableFuture<Void> holding = this.deliveries.deliverAsync(event(UuidV7.generate()));
        CompletableFuture<ProcessedEventPartitions.Result> maintenance = null;
        CompletableFuture<Void> next = null;
        try {
            held.awaitReached();

            maintenance = CompletableFuture.supplyAsync(this.partitions::maintain);
            EventEnvelope<ThingHappened> flowing = event(UuidV7.generate());
            next = this.deliveries.deliverAsync(flowing);

            await().atMost(Duration.ofSeconds(10))
                    .alias("the claim of the next event, while the maintenance runs and a transaction is open")
                    .until(next::isDone);
            assertThat(rows(flowing)).isEqualTo(1);
            assertThat(maintenance.get(10, TimeUnit.SECONDS).created()).contains(lastDay);
        } finally {
            held.release();
            holding.get(30, TimeUnit.SECONDS);
            if (maintenance != null) {
                maintenance.get(30, TimeUnit.SECONDS);
            }
            if (next != null) {
                next.get(30, TimeUnit.SECONDS);
            }
            this.partitions.maintain();
        }
    }

    /**
     * Today's partition missing (dropped by hand, or the maintenance not run for days): the claim of today's event
     * fails with 23514 (no partition for the row). The claim is the library's own statement, the same for every
     * message but its id: the database's condition, never the message's. Consumption halts, the event is held, not
     * dead-lettered, and applied once after the maintenance made the partition again.
     */
    @Test
    void aMissingPartitionHaltsConsumptionAndDeadLettersNothing() throws Exception {
        LocalDate today = LocalDate.now(ZoneOffset.UTC);
        this.jdbcTemplate.execute("DROP TABLE IF EXISTS " + partition(today));
        this.jdbcTemplate.execute("DROP TABLE IF EXISTS " + partition(today.plusDays(1)));
        EventEnvelope<ThingHappened> event = event(UuidV7.generate());
        try {
            CompletableFuture<Void> delivery = this.deliveries.deliverUntilTakenAsync(event, Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() != null);
            assertThat(this.outage.halt().cause()).contains("no partition");
            // Longer than the binding's three attempts would last.
            await().during(Duration.ofSeconds(5))
                    .atMost(Duration.ofSeconds(6))
                    .until(() -> !delivery.isDone() && this.deliveries.lastError() == null);

            assertThat(this.partitions.maintain().created()).contains(partition(today));
            delivery.get(30, TimeUnit.SECONDS);
        } finally {
            this.partitions.maintain();
        }
        assertThat(rows(event)).isEqualTo(1);
        assertThat(this.probe.invocations("recordThing")).isEqualTo(1);
        assertThat(this.deliveries.lastError()).as("nothing dead-lettered").isNull();
        await().atMost(Duration.ofSeconds(10)).until(() -> this.outage.halt() == null);
    }

    /**
     * An event whose id dates from the last day ahead, whose partition is not made yet (the maintenance has not run
     * since midnight): its claim fails with 23514 while the probe's, of today, goes through. That is the message's,
     * not the database's: it is dead-lettered as before, to be replayed, and consumption does not halt.
     */
    @Test
    void anEventOfADayWithoutItsPartitionYetIsTheMessagesFailureNotAnOutage() {
        List<String> attached = this.jdbcTemplate.queryForList(PARTITIONS, String.class);
        String lastDay = attached.get(attached.size() - 1);
        this.jdbcTemplate.execute("DROP TABLE " + lastDay);
        LocalDate day = LocalDate.parse(lastDay.substring(lastDay.length() - 8), DateTimeFormatter.BASIC_ISO_DATE);
        EventEnvelope<ThingHappened> event =
                event(UuidV7.at(day.atStartOfDay(ZoneOffset.UTC).toInstant().plusSeconds(3600)));
        try {
            this.deliveries.deliver(event);

            assertThat(this.deliveries.lastError()).as("dead-lettered").isNotNull();
            assertThat(this.outage.halt())
                    .as("no halt: the probe's claim went through")
                    .isNull();
            assertThat(rows(event)).isZero();
        } finally {
            this.partitions.maintain();
        }
    }

    @Test
    void droppingPartitionsOlderThanTheRetentionRemovesTheirRows() {
        String table = newTable();
        ProcessedEventPartitions partitions = maintenanceOf(table);
        Instant now = Instant.now();
        partitions.maintain(now);
        UUID old = UuidV7.at(now.minus(Duration.ofDays(29)));
        UUID recent = UuidV7.at(now.minus(Duration.ofDays(1)));
        claim(table, old);
        claim(table, recent);

        ProcessedEventPartitions.Result fiveDaysLater = partitions.maintain(now.plus(Duration.ofDays(5)));

        LocalDate today = LocalDate.ofInstant(now, ZoneOffset.UTC);
        assertThat(fiveDaysLater.dropped())
                .containsExactly(
                        partition(table, today.minusDays(30)),
                        partition(table, today.minusDays(29)),
                        partition(table, today.minusDays(28)),
                        partition(table, today.minusDays(27)),
                        partition(table, today.minusDays(26)));
        assertThat(fiveDaysLater.created()).hasSize(5);
        assertThat(rows(table, old)).isZero();
        assertThat(rows(table, recent)).isEqualTo(1);
    }

    /** Each maintenance reports the oldest partition it kept: its first day is the oldest id's, for the alert. */
    @Test
    void theMaintenanceReportsTheOldestPartitionKeptAgainstTheRetention() {
        String table = newTable();
        List<Instant> oldest = new CopyOnWriteArrayList<>();
        List<Duration> retentions = new CopyOnWriteArrayList<>();
        ProcessedEventPartitions partitions = new ProcessedEventPartitions(
                this.dataSource, table, Duration.ofDays(30), 2, Clock.systemUTC(), new IdempotencyMetrics() {
                    @Override
                    public void processedIdsKept(@Nullable Instant kept, Duration retention) {
                        oldest.add(kept);
                        retentions.add(retention);
                    }
                });
        Instant now = Instant.now();
        LocalDate today = LocalDate.ofInstant(now, ZoneOffset.UTC);

        partitions.maintain(now);
        partitions.maintain(now.plus(Duration.ofDays(5)));

        assertThat(oldest)
                .containsExactly(
                        today.minusDays(30).atStartOfDay(ZoneOffset.UTC).toInstant(),
                        today.minusDays(25).atStartOfDay(ZoneOffset.UTC).toInstant());
        assertThat(retentions).containsOnly(Duration.ofDays(30));
    }

    @Test
    void aDetachInterruptedHalfWayIsFinishedAndThePartitionDropped() throws Exception {
        String table = newTable();
        ProcessedEventPartitions partitions = maintenanceOf(table);
        Instant now = Instant.now();
        partitions.maintain(now);
        String oldest =
                partition(table, LocalDate.ofInstant(now, ZoneOffset.UTC).minusDays(30));
        interruptConcurrentDetach(table, oldest);
        assertThat(this.jdbcTemplate.queryForObject(
                        "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass(?)",
                        Boolean.class,
                        oldest))
                .as("left pending detach")
                .isTrue();

        ProcessedEventPartitions.Result nextDay = partitions.maintain(now.plus(Duration.ofDays(1)));

        assertThat(nextDay.dropped()).containsExactly(oldest);
        assertThat(exists(oldest)).isFalse();
    }

    @Test
    void aPartitionLeftDetachedIsDroppedWhenOldAndAttachedWhenInsideTheWindow() {
        String table = newTable();
        ProcessedEventPartitions partitions = maintenanceOf(table);
        Instant now = Instant.now();
        partitions.maintain(now);
        LocalDate today = LocalDate.ofInstant(now, ZoneOffset.UTC);
        String oldest = partition(table, today.minusDays(30));
        String ahead = partition(table, today.plusDays(2));
        // As an instance killed between detaching and dropping, or between creating and attaching, leaves them.
        this.jdbcTemplate.execute("ALTER TABLE %s DETACH PARTITION %s".formatted(table, oldest));
        this.jdbcTemplate.execute("ALTER TABLE %s DETACH PARTITION %s".formatted(table, ahead));

        ProcessedEventPartitions.Result nextDay = partitions.maintain(now.plus(Duration.ofDays(1)));

        assertThat(nextDay.dropped()).containsExactly(oldest);
        assertThat(exists(oldest)).isFalse();
        assertThat(attached(table)).contains(ahead).endsWith(partition(table, today.plusDays(3)));
        UUID dayAhead = UuidV7.at(now.plus(Duration.ofDays(2)));
        claim(table, dayAhead);
        assertThat(rows(table, dayAhead)).isEqualTo(1);
    }

    /**
     * Maintenance under load, as production runs it: two threads claiming today's ids all along, a transaction holding
     * a claim open meanwhile (as billing's does across an HTTP call), and two instances maintaining at once. One
     * maintains, the other skips the run; no claim fails; the partition the run cannot detach while the transaction is
     * open (its concurrent detach waits for it, past the lock timeout) is left for the next run, which drops it.
     */
    @Test
    void maintenanceUnderLoadOnTwoInstancesAtOnceFailsNoClaimAndTheNextRunFinishesIt() throws Exception {
        String table = newTable();
        Instant now = Instant.now();
        LocalDate today = LocalDate.ofInstant(now, ZoneOffset.UTC);
        ProcessedEventPartitions first = maintenanceOf(table);
        ProcessedEventPartitions second = maintenanceOf(table);
        // The window of yesterday: its oldest day is now older than the retention.
        first.maintain(now.minus(Duration.ofDays(1)));
        String old = partition(table, today.minusDays(31));
        AtomicBoolean claiming = new AtomicBoolean(true);
        AtomicInteger claims = new AtomicInteger();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        List<CompletableFuture<Void>> claimers = IntStream.range(0, 2)
                .mapToObj(thread -> CompletableFuture.runAsync(() -> {
                    while (claiming.get()) {
                        try {
                            claim(table, UuidV7.generate());
                            claims.incrementAndGet();
                        } catch (RuntimeException ex) {
                            failures.add(ex);
                        }
                    }
                }))
                .toList();
        ProcessedEventPartitions.Result[] runs;
        try (Connection holder = this.dataSource.getConnection()) {
            holder.setAutoCommit(false);
            try (Statement statement = holder.createStatement()) {
                statement.executeUpdate("INSERT INTO %s (event_id) VALUES ('%s')".formatted(table, UuidV7.generate()));
            }
            int before = claims.get();
            CompletableFuture<ProcessedEventPartitions.Result> one =
                    CompletableFuture.supplyAsync(() -> first.maintain(now));
            CompletableFuture<ProcessedEventPartitions.Result> other =
                    CompletableFuture.supplyAsync(() -> second.maintain(now));
            runs = new ProcessedEventPartitions.Result[] {one.get(60, TimeUnit.SECONDS), other.get(60, TimeUnit.SECONDS)
            };
            assertThat(claims.get())
                    .as("claims went on while the instances maintained")
                    .isGreaterThan(before);
            holder.rollback();
        }

        assertThat(runs)
                .as("one instance made the partition of the new day ahead; the other skipped its run")
                .anySatisfy(run -> assertThat(run.created()).containsExactly(partition(table, today.plusDays(2))))
                .anySatisfy(run -> {
                    assertThat(run.created()).isEmpty();
                    assertThat(run.dropped()).isEmpty();
                });
        assertThat(exists(old)).as("not dropped while the transaction was open").isTrue();
        assertThat(first.maintain(now).dropped()).as("the next run").containsExactly(old);
        claiming.set(false);
        CompletableFuture.allOf(claimers.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
        assertThat(failures).as("claims that failed").isEmpty();
        assertThat(attached(table))
                .startsWith(partition(table, today.minusDays(30)))
                .endsWith(partition(table, today.plusDays(2)))
                .doesNotContain(old);
    }

    /** Starts {@code DETACH PARTITION ... CONCURRENTLY}, holds it in its wait for older transactions, cancels it. */
    private void interruptConcurrentDetach(String table, String partition) throws Exception {
        try (Connection holder = this.dataSource.getConnection()) {
            holder.setAutoCommit(false);
            try (Statement statement = holder.createStatement()) {
                statement.executeQuery("SELECT count(*) FROM " + table).close();
            }
            CompletableFuture<Void> detach = CompletableFuture.runAsync(() -> this.jdbcTemplate.execute(
                    "ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY".formatted(table, partition)));
            String waiting = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    + " AND wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE % DETACH PARTITION %'";
            Integer pid = await().atMost(Duration.ofSeconds(10))
                    .until(
                            () -> this.jdbcTemplate.queryForList(waiting, Integer.class).stream()
                                    .findFirst()
                                    .orElse(null),
                            Objects::nonNull);
            this.jdbcTemplate.queryForObject("SELECT pg_cancel_backend(?)", Boolean.class, pid);
            assertThatThrownBy(() -> detach.get(10, TimeUnit.SECONDS)).hasRootCauseInstanceOf(SQLException.class);
            holder.rollback();
        }
    }

    private String newTable() {
        String table = "partitioned_" + TABLES.incrementAndGet();
        this.jdbcTemplate.execute(("CREATE TABLE %1$s (event_id uuid NOT NULL, scope text NOT NULL DEFAULT '',"
                        + " processed_at timestamptz NOT NULL DEFAULT now(),"
                        + " CONSTRAINT %1$s_pkey PRIMARY KEY (event_id, scope)) PARTITION BY RANGE (event_id)")
                .formatted(table));
        return table;
    }

    private ProcessedEventPartitions maintenanceOf(String table) {
        return new ProcessedEventPartitions(
                this.dataSource, table, Duration.ofDays(30), 2, Clock.systemUTC(), IdempotencyMetrics.NONE);
    }

    private void claim(String table, UUID eventId) {
        this.jdbcTemplate.update("INSERT INTO %s (event_id, scope) VALUES (?, '')".formatted(table), eventId);
    }

    private int rows(String table, UUID eventId) {
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM %s WHERE event_id = ?".formatted(table), Integer.class, eventId);
        return count != null ? count : 0;
    }

    private boolean exists(String table) {
        return Boolean.TRUE.equals(
                this.jdbcTemplate.queryForObject("SELECT to_regclass(?) IS NOT NULL", Boolean.class, table));
    }

    private List<String> attached(String table) {
        return this.jdbcTemplate.queryForList(PARTITIONS.replace("'processed_event'", "?"), String.class, table);
    }

    private static String partition(String table, LocalDate day) {
        return table + "_p" + DateTimeFormatter.BASIC_ISO_DATE.format(day);
    }

    private static EventEnvelope<ThingHappened> event(UUID eventId) {
        return new EventEnvelope<>(
                eventId, ThingHappened.NAME, Instant.now(), new ThingHappened(UUID.randomUUID(), BigDecimal.ONE));
    }

    private String partitionOf(EventEnvelope<?> event) {
        return this.jdbcTemplate.queryForObject(
                "SELECT tableoid::regclass::text FROM processed_event WHERE event_id = ?",
                String.class,
                event.eventId());
    }

    private int rows(EventEnvelope<?> event) {
        return rows("processed_event", event.eventId());
    }

    private static String partition(LocalDate day) {
        return partition("processed_event", day);
    }
}
