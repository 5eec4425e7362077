package dev.exactlyonce.idempotency.outbox;

import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;

/**
 * The {@code outbox} Actuator endpoint: what waits in the outbox, and the events the relay parked, oldest first (see
 * {@link ParkedOutboxEvents}). It only reads: releasing and skipping parked events are operations of
 * {@link WritableOutboxEndpoint}, registered in its place when {@code idempotency.endpoint.outbox-write-enabled} is
 * true.
 */
@Endpoint(id = "outbox")
public class OutboxEndpoint {

    /** The most parked events the endpoint lists. */
    static final int LISTED = 100;

    /**
     * What the endpoint shows.
     *
     * @param backlog what waits in the outbox
     * @param parked the parked events, oldest first (at most 100)
     */
    public record Status(OutboxBacklog backlog, List<ParkedOutboxEvents.Parked> parked) {}

    private final OutboxBacklogQuery backlog;

    final ParkedOutboxEvents parked;

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
}
