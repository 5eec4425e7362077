package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.util.UUID;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The {@code idempotencyGuard} function: composed first, as in
 * {@code spring.cloud.function.definition: idempotencyGuard|reserveStock}, it lets each event through to the
 * business function once.
 *
 * <p>For each message, inside the transaction the library opened around the composed invocation:
 *
 * <ol>
 *   <li>reads the event (from the envelope, or from headers, see {@code idempotency.event-id.source}) and maps its
 *       payload to the business function's input type; a message that is not a valid envelope, has no event id,
 *       names an event the function does not handle or carries a payload that does not map is rejected with a
 *       {@link RejectedMessageException}, before any write, and is never retried;
 *   <li>claims the event id with one {@code INSERT ... ON CONFLICT DO NOTHING} into {@code processed_event};
 *   <li>one row inserted: returns the typed payload, with the event id, name and time as headers
 *       ({@link EventHeaders}), and the business function runs in the same transaction;
 *   <li>zero rows: the event was already processed; no business function is called, and the message is
 *       acknowledged once the (empty) transaction commits.
 * </ol>
 *
 * <p>While a message is handled, the logging MDC holds its {@code event_id} and {@code event_name}.
 *
 * <p>If the business function throws, the transaction rolls back with the claim, so the retry processes the event
 * again. If two deliveries of one event run at once, the second claim waits for the first transaction: it finds the
 * row if that one commits, and claims the event if it rolls back.
 */
public final class IdempotencyGuard implements Function<Message<byte[]>, @Nullable Message<Object>> {

    /** The bean and function name of the guard. */
    public static final String NAME = "idempotencyGuard";

    private static final Logger logger = LoggerFactory.getLogger(IdempotencyGuard.class);

    private final EventReader reader;

    private final EnvelopeCodec codec;

    private final ProcessedEventStore store;

    private final DataSource dataSource;

    private final IdempotencyMetrics metrics;

    private final @Nullable ProcessedEventPartitions partitions;

    IdempotencyGuard(
            EventReader reader,
            EnvelopeCodec codec,
            ProcessedEventStore store,
            DataSource dataSource,
            IdempotencyMetrics metrics,
            @Nullable ProcessedEventPartitions partitions) {
        this.reader = reader;
        this.codec = codec;
        this.store = store;
        this.dataSource = dataSource;
        this.metrics = metrics;
        this.partitions = partitions;
    }

    @Override
    public @Nullable Message<Object> apply(Message<byte[]> message) {
        long start = System.nanoTime();
        GuardedInvocation invocation = currentInvocation();
        try {
            return guard(message, invocation);
        } finally {
            this.metrics.guardTime(invocation.binding(), System.nanoTime() - start);
        }
    }

    private @Nullable Message<Object> guard(Message<byte[]> message, GuardedInvocation invocation) {
        IncomingEvent event = this.reader.read(message);
        UUID eventId = event.eventId();
        MDC.put(EventHeaders.EVENT_NAME, event.eventName());
        if (eventId != null) {
            MDC.put(EventHeaders.EVENT_ID, eventId.toString());
        }
        Object payload = this.codec.readPayload(
                event.payload(), invocation.binding().payloadTypes().typeFor(event), event.eventName(), eventId);
        if (eventId != null && this.partitions != null) {
            this.partitions.check(eventId);
        }
        if (eventId == null) {
            logger.debug("Passing event {} through unguarded: it has no id", event.eventName());
        } else if (this.store.claim(eventId, invocation.binding().scope())) {
            invocation.markClaimed();
            logger.debug("Claimed event {} ({})", eventId, event.eventName());
        } else {
            invocation.markDuplicate();
            this.metrics.duplicate(invocation.binding());
            logger.warn("Discarded event {} ({}): already processed by this service", eventId, event.eventName());
            return null;
        }
        MessageBuilder<Object> builder = MessageBuilder.withPayload(payload)
                .copyHeaders(message.getHeaders())
                .setHeader(EventHeaders.EVENT_NAME, event.eventName());
        if (eventId != null) {
            builder.setHeader(EventHeaders.EVENT_ID, eventId);
        }
        if (event.occurredAt() != null) {
            builder.setHeader(EventHeaders.OCCURRED_AT, event.occurredAt());
        }
        return builder.build();
    }

    private GuardedInvocation currentInvocation() {
        GuardedInvocation invocation = GuardedInvocation.current();
        if (invocation == null || !TransactionSynchronizationManager.hasResource(this.dataSource)) {
            throw new IllegalStateException(NAME + " ran outside the transaction the library opens around a guarded"
                    + " binding, so its claim could not commit with the business effect. Compose it first in"
                    + " spring.cloud.function.definition (idempotencyGuard|yourFunction) and let the binder"
                    + " deliver the message; do not call it directly.");
        }
        return invocation;
    }
}
