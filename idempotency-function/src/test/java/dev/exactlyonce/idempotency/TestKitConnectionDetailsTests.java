package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.ProcessedEvents;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/** The test kit's database as Spring Boot's connection details, a bean instead of properties. */
@SpringBootTest
@EnableIdempotencyTestKit
class TestKitConnectionDetailsTests {

    private static final TestDatabase database = TestPostgres.newDatabase("details");

    @TestConfiguration(proxyBeanMethods = false)
    static class Database {

        @Bean
        JdbcConnectionDetails testDatabase() {
            return database.connectionDetails();
        }
    }

    @Autowired
    EventDeliveries deliveries;

    @Autowired
    ProcessedEvents processedEvents;

    @Autowired
    DataSource dataSource;

    @Test
    void theServiceRunsOnTheDatabaseItsConnectionDetailsName() {
        EventEnvelope<ThingHappened> event = Things.thingHappened();

        this.deliveries.deliver(event, 2);

        assertThat(this.processedEvents.rows(event.eventId())).isEqualTo(1);
        assertThat(new JdbcTemplate(this.dataSource).queryForObject("SELECT current_database()", String.class))
                .isEqualTo(database.name());
    }
}
