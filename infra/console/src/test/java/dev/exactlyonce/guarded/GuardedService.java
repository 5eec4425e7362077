package dev.exactlyonce.guarded;

import dev.exactlyonce.idempotency.envelope.EventName;
import java.util.UUID;
import java.util.function.Consumer;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.web.SecurityFilterChain;

/**
 * A guarded service for the console's tests to watch, outside the console's package: one function composed as
 * {@code idempotencyGuard|recordParcel}, its Actuator endpoints on a management port of its own. A parcel of no weight
 * is poison: its function throws, and the message ends in the dead-letter queue, recorded. While {@code scale_fault}
 * has a row, every parcel fails so.
 */
@SpringBootApplication
public class GuardedService {

    /** The event it takes. */
    @EventName(ParcelWeighed.NAME)
    public record ParcelWeighed(UUID parcelId, int grams) {

        public static final String NAME = "console.parcel.weighed.v1";
    }

    /**
     * Its management port answers without authentication, on the loopback interface, as the shop's services' do (the
     * console's own classes put Spring Security on this class path).
     */
    @Bean
    SecurityFilterChain openManagementPort(HttpSecurity http) throws Exception {
        return http.authorizeHttpRequests(requests -> requests.anyRequest().permitAll())
                .csrf(csrf -> csrf.disable())
                .build();
    }

    @Bean
    Consumer<ParcelWeighed> recordParcel(JdbcTemplate jdbcTemplate) {
        return parcel -> {
            if (parcel.grams() <= 0) {
                throw new IllegalArgumentException("A parcel of " + parcel.grams() + " g");
            }
            if (jdbcTemplate.queryForObject("SELECT count(*) FROM scale_fault", Integer.class) > 0) {
                throw new IllegalStateException("The scale is offline");
            }
            jdbcTemplate.update(
                    "INSERT INTO parcel (parcel_id, grams) VALUES (?, ?)", parcel.parcelId(), parcel.grams());
        };
    }
}
