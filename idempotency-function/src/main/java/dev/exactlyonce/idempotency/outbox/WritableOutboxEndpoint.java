package dev.exactlyonce.idempotency.outbox;

import java.util.UUID;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * The {@code outbox} endpoint with a write operation that releases or skips a parked event
 * ({@code POST /actuator/outbox/<event id>} with {@code {"action": "release"}} or {@code {"action": "skip"}}). A skip
 * drops an event, so it exists only where {@code idempotency.endpoint.outbox-write-enabled} is true; put the management
 * port behind authentication before enabling it.
 */
@Endpoint(id = "outbox")
public class WritableOutboxEndpoint extends OutboxEndpoint {

    /**
     * What an action did.
     *
     * @param id the event
     * @param action {@code release} or {@code skip}
     * @param applied whether it was done: {@code false} when the event is not parked (published, skipped, released or
     *     never written)
     */
    public record Result(UUID id, String action, boolean applied) {}

    WritableOutboxEndpoint(OutboxBacklogQuery backlog, ParkedOutboxEvents parked) {
        super(backlog, parked);
    }

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
