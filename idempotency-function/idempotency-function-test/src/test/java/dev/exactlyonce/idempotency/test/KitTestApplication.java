package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.envelope.EventName;
import java.util.Map;
import java.util.UUID;
import java.util.function.Function;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/** A guarded service for the kit's own tests: {@code recordKit} records its effect and emits an event. */
@SpringBootApplication
class KitTestApplication {

    @Bean
    Function<KitHappened, OutgoingEvent> recordKit(JdbcTemplate jdbcTemplate) {
        return kit -> {
            jdbcTemplate.update("INSERT INTO kit_effect (kit_id) VALUES (?)", kit.kitId());
            return new OutgoingEvent("test.kit.recorded.v1", kit.kitId().toString(), Map.of("kitId", kit.kitId()));
        };
    }

    @EventName(KitHappened.NAME)
    record KitHappened(UUID kitId) {

        static final String NAME = "test.kit.happened.v1";
    }
}
