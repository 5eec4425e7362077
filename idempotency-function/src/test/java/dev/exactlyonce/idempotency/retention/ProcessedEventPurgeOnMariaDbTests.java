package dev.exactlyonce.idempotency.retention;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestMariaDb;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The purge of {@link ProcessedEventPurgeTests} on MariaDB: ids older than the retention (30 days) go, in batches of
 * 500; ids inside it stay; a run that finds another instance purging (holding the named lock) does nothing.
 */
@SpringBootTest(
        properties = {
            "spring.flyway.locations=classpath:db/migration-mariadb",
            "idempotency.purge.batch-size=500",
            "idempotency.purge.enabled=false"
        })
@EnableIdempotencyTestKit
class ProcessedEventPurgeOnMariaDbTests {

    private static final TestDatabase database = TestMariaDb.newDatabase("purge");

    private static final String OLD_ROWS = """
            INSERT INTO processed_event (event_id, processed_at)
            SELECT UUID(), NOW(6) - INTERVAL 40 DAY - INTERVAL seq SECOND FROM seq_1_to_%d""";

    private static final String LOCK_NAME =
            "SHA1(CONCAT_WS('/', DATABASE(), 'dev.exactlyonce.idempotency', 'processed_event'))";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        database.registerDataSource(registry);
    }

    @Autowired
    ProcessedEventPurge purge;

    @Autowired
    JdbcTemplate jdbcTemplate;

    @BeforeEach
    void empty() {
        this.jdbcTemplate.update("DELETE FROM processed_event");
    }

    @Test
    void idsOlderThanTheRetentionAreDeletedInBatchesAndTheOthersStay() {
        this.jdbcTemplate.update(OLD_ROWS.formatted(2_345));
        this.jdbcTemplate.update(
                "INSERT INTO processed_event (event_id, processed_at) VALUES (UUID(), NOW(6) - INTERVAL 29 DAY)");

        ProcessedEventPurge.Result result = this.purge.purge();

        assertThat(result.ran()).isTrue();
        assertThat(result.rows()).isEqualTo(2_345);
        assertThat(result.batches())
                .as("four full batches of 500, and one of 345")
                .isEqualTo(5);
        assertThat(count()).as("the id inside the retention").isEqualTo(1);
    }

    @Test
    void aRunThatFindsAnotherInstancePurgingDoesNothing() throws Exception {
        this.jdbcTemplate.update(OLD_ROWS.formatted(100));
        try (Connection otherInstance =
                        DriverManager.getConnection(database.jdbcUrl(), database.username(), database.password());
                Statement statement = otherInstance.createStatement()) {
            statement.execute("SELECT GET_LOCK(" + LOCK_NAME + ", 0)");

            ProcessedEventPurge.Result skipped = this.purge.purge();

            assertThat(skipped.ran()).isFalse();
            assertThat(count()).isEqualTo(100);
            statement.execute("SELECT RELEASE_LOCK(" + LOCK_NAME + ")");
        }

        assertThat(this.purge.purge().rows())
                .as("once the other instance is done")
                .isEqualTo(100);
    }

    private int count() {
        Integer count = this.jdbcTemplate.queryForObject("SELECT count(*) FROM processed_event", Integer.class);
        return count != null ? count : 0;
    }
}
