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
 * @param eventId where the guard reads each message's event id
 * @param keyScope what an event is recorded as processed for: the whole service ({@code service}: a second function
 *     bound to the same event finds it processed and does nothing), or each function ({@code function}: every
 *     function composed after the guard processes each event once)
 */
@ConfigurationProperties("idempotency")
public record IdempotencyProperties(
        @DefaultValue("processed_event") String tableName,
        @DefaultValue("true") boolean migrateWithFlyway,
        @DefaultValue EventId eventId,
        @DefaultValue("service") KeyScope keyScope) {

    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

    public IdempotencyProperties {
        if (tableName == null || !IDENTIFIER.matcher(tableName).matches()) {
            throw new IllegalArgumentException(
                    "idempotency.table-name must be a lower-case SQL identifier of at most 63 characters"
                            + " (letters, digits and underscores, not starting with a digit), but was '%s'"
                                    .formatted(tableName));
        }
    }

    /**
     * Where the guard reads each message's event id, under {@code idempotency.event-id}.
     *
     * @param source where the id (and the event's name and time) come from; with any source but {@code envelope} the
     *     message body is the bare payload
     * @param header the header that carries the id when {@code source} is {@code header}
     * @param whenMissing what to do with a message that carries no event id: {@code reject} it to the dead-letter
     *     queue (it cannot be deduplicated), or let it {@code pass-through} to the business function unguarded (no
     *     claim; a copy of it would apply twice). An envelope without {@code event_id} is malformed and always
     *     rejected.
     */
    public record EventId(
            @DefaultValue("envelope") EventIdSource source,
            @DefaultValue("event_id") String header,
            @DefaultValue("reject") MissingEventId whenMissing) {}

    /** What an event is recorded as processed for. */
    public enum KeyScope {
        /** The service: the key is the event id. */
        SERVICE,
        /** Each function: the key is the event id and the function. */
        FUNCTION
    }

    /** Where a message's event id comes from. */
    public enum EventIdSource {
        /** The JSON envelope's {@code event_id}, {@code event_name}, {@code occurred_at} and {@code payload}. */
        ENVELOPE,
        /**
         * The header named by {@code idempotency.event-id.header}; the name from the {@code event_name} header, or else
         * the AMQP routing key; the time from the {@code occurred_at} header, if any.
         */
        HEADER,
        /** The AMQP {@code message_id} property; the name and time as for {@link #HEADER}. */
        MESSAGE_ID,
        /**
         * CloudEvents binary mode: {@code ce_id}, {@code ce_type}, {@code ce_time} (also spelt {@code ce-id} ..., or
         * {@code cloudEvents:id} ... on AMQP).
         */
        CLOUDEVENTS
    }

    /** What to do with a message that carries no event id. */
    public enum MissingEventId {
        /** Reject it to the dead-letter queue, without retry. */
        REJECT,
        /** Let it through to the business function, in the transaction but with no claim. */
        PASS_THROUGH
    }
}
