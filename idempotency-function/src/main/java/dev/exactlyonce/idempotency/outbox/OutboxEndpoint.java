package dev.exactlyonce.idempotency.outbox;

import java.util.List;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * The {@code outbox} Actuator endpoint: the backlog and the parked events, and ({@code unrestricted} access only) a
 * write operation that releases or skips one. See docs/outbox.md ("A row the broker refuses").
 */
@Endpoint(id = "outbox", defaultAccess = Access.READ_ONLY)
public class OutboxEndpoint {

    static final int LISTED = 100;

    /** What the endpoint shows: the backlog, and the parked events, oldest first (at most 100). */
    public record Status(OutboxBacklog backlog, List<ParkedOutboxEvents.Parked> parked) {}

    private final OutboxBacklogQuery backlog;

    private final ParkedOutboxEvents parked;

    OutboxEndpoint(OutboxBacklogQuery backlog, ParkedOutboxEvents parked) {
        this.backlog = backlog;
        this.parked = parked;
    }

    /** The backlog and the parked events; nothing when the schema has no outbox table. */
    @ReadOperation
    public @Nullable Status status() {
        OutboxBacklog backlog = this.backlog.read();
        return backlog != null ? new Status(backlog, this.parked.list(LISTED)) : null;
    }

    /**
     * What an action did: {@code applied} is {@code false} when the event is not parked (published, skipped, released
     * or never written).
     */
    public record Result(UUID id, String action, boolean applied) {}

    /** Releases ({@code release}: tried again) or skips ({@code skip}: never published) a parked event. */
    @WriteOperation
    public Result act(@Selector UUID id, String action) {
        return switch (action) {
            case "release" -> new Result(id, action, this.parked.release(id));
            case "skip" -> new Result(id, action, this.parked.skip(id));
            default ->
                throw new InvalidEndpointRequestException(
                        "Unknown action '%s': release or skip".formatted(action), "Unknown action");
        };
    }
}
