package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * The {@code idempotency} endpoint with a write operation that runs the purge now ({@code POST
 * /actuator/idempotency}). It deletes rows, so it exists only where {@code idempotency.endpoint.purge-enabled} is
 * true; put the management port behind authentication before enabling it.
 */
@Endpoint(id = "idempotency")
public class PurgingIdempotencyEndpoint extends IdempotencyEndpoint {

    private final @Nullable ProcessedEventPurge purge;

    PurgingIdempotencyEndpoint(
            DataSource dataSource,
            IdempotencyProperties properties,
            Supplier<IdempotencyEndpoint.@Nullable LastPurge> lastPurge,
            @Nullable ProcessedEventPurge purge) {
        super(dataSource, properties, lastPurge);
        this.purge = purge;
    }

    /** Runs the purge now (in partitioned mode, there is none: old partitions are dropped). */
    @WriteOperation
    public ProcessedEventPurge.@Nullable Result purge() {
        return this.purge != null ? this.purge.purge() : null;
    }
}
