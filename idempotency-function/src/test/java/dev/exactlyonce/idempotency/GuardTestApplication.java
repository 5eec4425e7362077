package dev.exactlyonce.idempotency;

import java.util.List;
import java.util.function.Consumer;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;

/** A service whose business functions, {@code recordThing} and {@code auditThing}, are composed after the guard. */
@SpringBootApplication
class GuardTestApplication {

    @Bean
    Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
        return thing -> jdbcTemplate.update(
                "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
    }

    /** The function of a batch binding: it takes the payloads of a batch. */
    @Bean
    Consumer<List<ThingHappened>> recordThings(JdbcTemplate jdbcTemplate) {
        return things -> jdbcTemplate.batchUpdate(
                "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)",
                things,
                things.size(),
                (statement, thing) -> {
                    statement.setObject(1, thing.thingId());
                    statement.setBigDecimal(2, thing.amount());
                });
    }

    /** A second function of the same events, bound only where a test composes it. */
    @Bean
    Consumer<ThingHappened> auditThing(JdbcTemplate jdbcTemplate) {
        return thing -> jdbcTemplate.update("INSERT INTO thing_audit (thing_id) VALUES (?)", thing.thingId());
    }
}
