package dev.exactlyonce.idempotency.retention;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import dev.exactlyonce.idempotency.CapturedLogs;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/**
 * After each purge, on each database the library supports: the dead letters still waiting are reported to the meters,
 * and a WARN says so once the oldest has waited three quarters of the dead letters' retention; a replay of it applied,
 * it no longer waits.
 */
class DeadLetterHorizonTests {

    private static final Duration RETENTION = Duration.ofDays(14);

    private static final String NAME = "test.thing.happened.v1";

    @RegisterExtension
    final CapturedLogs logs = CapturedLogs.of(DeadLetterHorizon.class);

    /** What the meters were last told. */
    private long waiting = -1;

    private @Nullable Instant oldest;

    private final IdempotencyMetrics metrics = new IdempotencyMetrics() {
        @Override
        public void deadLettersWaiting(long count, @Nullable Instant oldestDeadLetter, Duration retention) {
            DeadLetterHorizonTests.this.waiting = count;
            DeadLetterHorizonTests.this.oldest = oldestDeadLetter;
        }
    };

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void theOldestDeadLetterStillWaitingIsReportedAndWarnedOfBeforeItsReplayIsRefused(String database) {
        DataSource dataSource = dataSource(database);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        DeadLetterRecords records = Dialect.of(dataSource).deadLetters(jdbc, "processed_event", RETENTION);
        DeadLetterHorizon horizon = new DeadLetterHorizon(records, this.metrics);
        UUID old = UuidV7.generate();
        byte[] body = "{\"a\":1}".getBytes(UTF_8);
        records.record("things-in-0", old, NAME, body, Duration.ZERO);
        jdbc.update("UPDATE processed_event_dead_letter SET dead_lettered_at = dead_lettered_at - "
                + (database.equals("mariadb") ? "INTERVAL 11 DAY" : "interval '11 days'"));
        records.record("things-in-0", UuidV7.generate(), NAME, body, Duration.ZERO);

        horizon.run();

        assertThat(this.waiting).isEqualTo(2);
        assertThat(Duration.between(this.oldest, Instant.now()))
                .isBetween(
                        Duration.ofDays(11).minusMinutes(5), Duration.ofDays(11).plusMinutes(5));
        assertThat(this.logs.events())
                .as("11 days of a retention of 14: past three quarters")
                .singleElement()
                .satisfies(event -> {
                    assertThat(event.getLevel()).isEqualTo(Level.WARN);
                    assertThat(event.getFormattedMessage())
                            .contains("2 dead letter(s) of this service wait to be replayed")
                            .contains("idempotency.replay-horizon.dead-letter-retention (PT336H)");
                });

        this.logs.clear();
        records.takenBack("things-in-0", old, NAME, body);
        horizon.run();

        assertThat(this.waiting).as("the old one's replay applied").isEqualTo(1);
        assertThat(Duration.between(this.oldest, Instant.now())).isLessThan(Duration.ofMinutes(5));
        assertThat(this.logs.events())
                .extracting(ILoggingEvent::getFormattedMessage)
                .isEmpty();
    }

    private static DataSource dataSource(String database) {
        TestDatabase created = database.equals("mariadb")
                ? TestMariaDb.newDatabase("dlhorizon")
                : TestPostgres.newDatabase("dlhorizon");
        DataSource dataSource = new DriverManagerDataSource(created.jdbcUrl(), created.username(), created.password());
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-" + database + ".sql"))
                .execute(dataSource);
        return dataSource;
    }
}
