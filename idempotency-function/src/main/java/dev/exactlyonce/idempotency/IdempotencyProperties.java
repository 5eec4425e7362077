package dev.exactlyonce.idempotency;

import java.util.regex.Pattern;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * Configuration of the idempotency guard, under the {@code idempotency} prefix.
 *
 * @param tableName name of the table that records processed event ids, in the schema the service's connections
 *     use; a lower-case SQL identifier
 * @param migrateWithFlyway whether the library creates and migrates its table with Flyway when the service uses
 *     Flyway (it keeps its own history table, {@code idempotency_schema_history}, so its versions never clash with
 *     the service's); set to {@code false} to create the table yourself from {@code schema-postgresql.sql}
 */
@ConfigurationProperties("idempotency")
public record IdempotencyProperties(
        @DefaultValue("processed_event") String tableName,
        @DefaultValue("true") boolean migrateWithFlyway) {

    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

    public IdempotencyProperties {
        if (tableName == null || !IDENTIFIER.matcher(tableName).matches()) {
            throw new IllegalArgumentException(
                    "idempotency.table-name must be a lower-case SQL identifier of at most 63 characters"
                            + " (letters, digits and underscores, not starting with a digit), but was '%s'"
                                    .formatted(tableName));
        }
    }
}
