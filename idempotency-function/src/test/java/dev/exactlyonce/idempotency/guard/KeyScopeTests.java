package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.BusinessFunctionProbe;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A service that binds the same events to two functions, each on a binding of its own (two groups of one
 * destination): with the service scope the second function finds the event processed, as the design's source article
 * accepts; with the function scope each function processes each event once.
 */
class KeyScopeTests {

    private static final String TWO_FUNCTIONS =
            "spring.cloud.function.definition=" + "idempotencyGuard|recordThing;idempotencyGuard|auditThing";

    private static final String AUDIT_BINDING = "spring.cloud.stream.bindings.idempotencyGuardauditThing-in-0.";

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("scope").registerDataSource(registry);
    }

    abstract static class TwoFunctions {

        @Autowired
        EventDeliveries deliveries;

        @Autowired
        BusinessFunctionProbe probe;

        @Autowired
        JdbcTemplate jdbcTemplate;

        @AfterEach
        void reset() {
            this.probe.reset();
        }

        int rows(String table, EventEnvelope<ThingHappened> event) {
            Integer count = this.jdbcTemplate.queryForObject(
                    "SELECT count(*) FROM " + table + " WHERE thing_id = ?",
                    Integer.class,
                    event.payload().thingId());
            return count != null ? count : 0;
        }

        int claims(EventEnvelope<ThingHappened> event) {
            Integer count = this.jdbcTemplate.queryForObject(
                    "SELECT count(*) FROM processed_event WHERE event_id = ?", Integer.class, event.eventId());
            return count != null ? count : 0;
        }
    }

    @Nested
    @SpringBootTest(
            properties = {
                TWO_FUNCTIONS,
                AUDIT_BINDING + "destination=things",
                AUDIT_BINDING + "group=audit",
                "idempotency.key-scope=service"
            })
    @EnableIdempotencyTestKit
    class ServiceScope extends TwoFunctions {

        @Test
        void theSecondFunctionFindsTheEventProcessedByTheFirst() {
            EventEnvelope<ThingHappened> event = Things.thingHappened();

            this.deliveries.deliver(event, 2);

            assertThat(rows("thing_effect", event) + rows("thing_audit", event))
                    .as("one effect in the whole service")
                    .isEqualTo(1);
            assertThat(claims(event)).isEqualTo(1);
        }
    }

    @Nested
    @SpringBootTest(
            properties = {
                TWO_FUNCTIONS,
                AUDIT_BINDING + "destination=things",
                AUDIT_BINDING + "group=audit",
                "idempotency.key-scope=function"
            })
    @EnableIdempotencyTestKit
    class FunctionScope extends TwoFunctions {

        @Test
        void eachFunctionProcessesEachEventOnce() {
            EventEnvelope<ThingHappened> event = Things.thingHappened();

            this.deliveries.deliver(event, 2);

            assertThat(rows("thing_effect", event)).isEqualTo(1);
            assertThat(rows("thing_audit", event)).isEqualTo(1);
            assertThat(this.probe.invocations("recordThing")).isEqualTo(1);
            assertThat(this.probe.invocations("auditThing")).isEqualTo(1);
            assertThat(this.jdbcTemplate.queryForList(
                            "SELECT scope FROM processed_event WHERE event_id = ? ORDER BY scope",
                            String.class,
                            event.eventId()))
                    .containsExactly("auditThing", "recordThing");
        }
    }
}
