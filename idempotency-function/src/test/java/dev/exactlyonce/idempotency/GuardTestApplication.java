package dev.exactlyonce.idempotency;

import java.util.function.Consumer;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/** A service with one business function, {@code recordThing}, composed after the guard. */
@SpringBootApplication
class GuardTestApplication {

    @Bean
    Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
        return thing -> jdbcTemplate.update(
                "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
    }
}
