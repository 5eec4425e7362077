package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Partitioned mode: the table is range-partitioned by the UUID v7 event id, one partition a day, created ahead of
 * time, dropped whole once older than the retention (30 days).
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

    @AfterEach
    void reset() {
        this.probe.reset();
        this.deliveries.resetLastError();
    }

    @Test
    void partitionsCoverTheRetentionAndTheDaysAheadFromStartUp() {
        LocalDate today = LocalDate.now(ZoneOffset.UTC);

        assertThat(this.jdbcTemplate.queryForList(PARTITIONS, String.class))
                .startsWith(partition(today.minusDays(30)))
                .endsWith(partition(today.plusDays(2)))
                .hasSize(33);
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
    void droppingPartitionsOlderThanTheRetentionRemovesTheirRows() {
        Instant now = Instant.now();
        EventEnvelope<ThingHappened> old = event(UuidV7.at(now.minus(Duration.ofDays(29))));
        EventEnvelope<ThingHappened> recent = event(UuidV7.at(now.minus(Duration.ofDays(1))));
        this.deliveries.deliver(old);
        this.deliveries.deliver(recent);

        ProcessedEventPartitions.Result fiveDaysLater = this.partitions.maintain(now.plus(Duration.ofDays(5)));

        LocalDate today = LocalDate.now(ZoneOffset.UTC);
        assertThat(fiveDaysLater.dropped())
                .containsExactlyElementsOf(List.of(
                        partition(today.minusDays(30)),
                        partition(today.minusDays(29)),
                        partition(today.minusDays(28)),
                        partition(today.minusDays(27)),
                        partition(today.minusDays(26))));
        assertThat(fiveDaysLater.created()).hasSize(5);
        assertThat(rows(old)).isZero();
        assertThat(rows(recent)).isEqualTo(1);
        this.partitions.maintain();
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
        Integer count = this.jdbcTemplate.queryForObject(
                "SELECT count(*) FROM processed_event WHERE event_id = ?", Integer.class, event.eventId());
        return count != null ? count : 0;
    }

    private static String partition(LocalDate day) {
        return "processed_event_p" + DateTimeFormatter.BASIC_ISO_DATE.format(day);
    }
}
