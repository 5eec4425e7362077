package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.FunctionDefinitions;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.IncomingEvent;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.ProcessedEventStore;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.function.Function;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.GenericMessage;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The {@code idempotencyGuard} function, composed first ({@code idempotencyGuard|reserveStock}): in the message's
 * transaction it reads the event ({@link RejectedMessageException} if it cannot), claims its id (a batch's ids) with
 * one statement, and hands the mapped payload, with {@link EventHeaders}, to the business function on a first delivery
 * only. See docs/design.md, "How it works", and docs/batch-mode.md.
 */
public final class IdempotencyGuard implements Function<Message<Object>, @Nullable Message<Object>> {

    /** The bean and function name of the guard. */
    public static final String NAME = FunctionDefinitions.GUARD;

    /** The name of the guard's observation, and of the timer Micrometer makes of it. */
    public static final String OBSERVATION = "idempotency.guard";

    private static final Logger logger = LoggerFactory.getLogger(IdempotencyGuard.class);

    private final EventReader reader;

    private final EnvelopeCodec codec;

    private final ProcessedEventStore store;

    private final DataSource dataSource;

    private final ObservationRegistry observations;

    private final @Nullable ProcessedEventPartitions partitions;

    private final DeadLetterRecords deadLetters;

    IdempotencyGuard(
            EventReader reader,
            EnvelopeCodec codec,
            ProcessedEventStore store,
            DeadLetterRecords deadLetters,
            DataSource dataSource,
            ObservationRegistry observations,
            @Nullable ProcessedEventPartitions partitions) {
        this.reader = reader;
        this.codec = codec;
        this.store = store;
        this.deadLetters = deadLetters;
        this.dataSource = dataSource;
        this.observations = observations;
        this.partitions = partitions;
    }

    /** The event id the guard reads from a delivered message ({@code idempotency.event-id.source}), or {@code null}. */
    public @Nullable UUID eventIdOf(MessageHeaders headers, byte[] body) {
        try {
            return this.reader.read(headers, body, null, Map.of()).eventId();
        } catch (RejectedMessageException ex) {
            return ex.eventId();
        }
    }

    /**
     * Guards a message, observed as {@value #OBSERVATION} with the outcome: {@code processed}, {@code duplicate},
     * {@code rejected}, {@code passed} (no id, let through) or {@code failed}.
     */
    @Override
    public @Nullable Message<Object> apply(Message<Object> message) {
        MessageTransaction invocation = currentInvocation();
        GuardedBinding binding = invocation.binding();
        Observation observation = Observation.createNotStarted(OBSERVATION, this.observations)
                .contextualName("idempotency guard " + binding.bindingName())
                .lowCardinalityKeyValue("binding", binding.bindingName())
                .lowCardinalityKeyValue("function", binding.functions())
                .start();
        String outcome = "failed";
        try (Observation.Scope scope = observation.openScope()) {
            Message<Object> guarded = binding.batch() ? guardBatch(message, invocation) : guard(message, invocation);
            outcome = invocation.claimed() > 0 ? "processed" : invocation.duplicates() > 0 ? "duplicate" : "passed";
            return guarded;
        } catch (RejectedMessageException ex) {
            outcome = "rejected";
            throw ex;
        } catch (RuntimeException ex) {
            observation.error(ex);
            throw ex;
        } catch (Error error) {
            observation.error(error);
            throw GuardedBusinessFunction.thrown(NAME, error);
        } finally {
            observation.lowCardinalityKeyValue("outcome", outcome).stop();
        }
    }

    private @Nullable Message<Object> guard(Message<Object> message, MessageTransaction invocation) {
        byte[] body = body(message.getPayload());
        IncomingEvent event = this.reader.read(
                message.getHeaders(),
                body,
                invocation.routes(),
                invocation.binding().routeNames());
        UUID eventId = event.eventId();
        MDC.put(EventHeaders.EVENT_NAME, event.eventName());
        if (eventId != null) {
            MDC.put(EventHeaders.EVENT_ID, eventId.toString());
        }
        Type type = checked(event, invocation.binding());
        if (event.movedBack() && eventId == null) {
            throw unrecorded(event);
        }
        if (eventId == null) {
            logger.debug("Passing event {} through unguarded: it has no id", event.eventName());
        } else if (invocation.firstStatement(() -> {
            if (event.movedBack()) {
                checkRecorded(event, body, invocation.binding());
            }
            boolean claimed =
                    this.store.claim(new ProcessedEventStore.Key(eventId, event.eventName()), invocation.binding());
            if (claimed && event.movedBack()) {
                // After the claim, which serializes the copies of the replay and bounds the transaction's lock waits.
                this.deadLetters.takenBack(invocation.binding().bindingName(), eventId, event.eventName(), body);
            }
            return claimed;
        })) {
            invocation.countClaimed(1);
            logger.debug("Claimed event {} ({})", eventId, event.eventName());
        } else {
            invocation.skipBusinessFunctions();
            invocation.countDuplicates(1);
            logger.debug("Discarded event {} ({}): already processed by this service", eventId, event.eventName());
            return null;
        }
        Object payload = this.codec.readPayload(event.payload(), type, event.eventName(), eventId);
        return eventMessage(payload, event, invocation.binding().takesMessages() ? message.getHeaders() : Map.of());
    }

    /** A batch: a message that cannot be processed is set aside, and dead-lettered alone once the batch commits. */
    private @Nullable Message<Object> guardBatch(Message<Object> delivered, MessageTransaction invocation) {
        // A binder that hands on a lone message as it is (a test binder, say) delivers a batch of one.
        Message<Object> message = delivered.getPayload() instanceof List<?>
                ? delivered
                : MessageBuilder.<Object>withPayload(List.of(delivered.getPayload()))
                        .copyHeaders(delivered.getHeaders())
                        .build();
        List<?> bodies = (List<?>) message.getPayload();
        GuardedBinding binding = invocation.binding();
        Read all = read(delivered, bodies, invocation);
        Read read = all.events().stream()
                        .anyMatch(checked -> checked != null && checked.event().movedBack())
                ? recordedOnly(all, bodies, invocation)
                : all;
        putInMdc(read);
        Set<ProcessedEventStore.Key> claimed = read.firstCopies().isEmpty()
                ? Set.of()
                : invocation.firstStatement(
                        () -> this.store.claimAll(read.firstCopies().keySet(), binding));
        FirstDeliveries first = firstDeliveries(delivered, read, claimed, invocation);
        takenBack(read, bodies, claimed, invocation);
        List<MessageTransaction.Delivery> firstDeliveries = first.deliveries();
        int duplicates = bodies.size() - invocation.rejected().size() - firstDeliveries.size();
        invocation.countDuplicates(duplicates);
        logger.debug(
                "Claimed {} of {} event(s) of a batch; {} already processed by this service, {} rejected",
                firstDeliveries.size(),
                bodies.size(),
                duplicates,
                invocation.rejected().size());
        if (firstDeliveries.isEmpty()) {
            invocation.skipBusinessFunctions();
            return null;
        }
        // As in single-message mode, an event without an id passes through unguarded and is not counted as processed.
        invocation.countClaimed(firstDeliveries.size() - first.unguarded());
        if (binding.oneEventPerCall()) {
            invocation.moreEvents(firstDeliveries.subList(1, firstDeliveries.size()));
            return firstDeliveries.get(0).message().get();
        }
        return MessageBuilder.<Object>withPayload(firstDeliveries.stream()
                        .map(MessageTransaction.Delivery::payload)
                        .toList())
                .copyHeaders(message.getHeaders())
                .build();
    }

    private void takenBack(
            Read read, List<?> bodies, Set<ProcessedEventStore.Key> claimed, MessageTransaction invocation) {
        for (ProcessedEventStore.Key key : claimed) {
            Integer index = read.firstCopies().get(key);
            Checked checked = index != null ? read.events().get(index) : null;
            if (checked != null
                    && checked.event().movedBack()
                    && !invocation.rejected().containsKey(index)) {
                this.deadLetters.takenBack(
                        invocation.binding().bindingName(), key.eventId(), key.eventName(), body(bodies.get(index)));
            }
        }
    }

    /** A batch's messages, read: each event and its payload's type ({@code null}: rejected), each id's first copy. */
    private record Read(List<@Nullable Checked> events, Map<ProcessedEventStore.Key, Integer> firstCopies) {}

    private Read read(Message<Object> delivered, List<?> bodies, MessageTransaction invocation) {
        List<@Nullable Checked> events = new ArrayList<>(bodies.size());
        Map<ProcessedEventStore.Key, Integer> firstCopies = new LinkedHashMap<>();
        for (int index = 0; index < bodies.size(); index++) {
            Checked checked = null;
            try {
                byte[] body = body(bodies.get(index));
                IncomingEvent event = delivered.getPayload() instanceof List<?>
                        ? this.reader.readInBatch(
                                delivered,
                                index,
                                body,
                                invocation.routes(),
                                invocation.binding().routeNames())
                        : this.reader.read(
                                delivered.getHeaders(),
                                body,
                                invocation.routes(),
                                invocation.binding().routeNames());
                checked = new Checked(event, checked(event, invocation.binding()));
                if (event.eventId() != null) {
                    firstCopies.putIfAbsent(new ProcessedEventStore.Key(event.eventId(), event.eventName()), index);
                }
            } catch (RejectedMessageException ex) {
                invocation.reject(index, ex);
            }
            events.add(checked);
        }
        return new Read(events, firstCopies);
    }

    /** The batch's events, dead letters moved back that the guard did not record set aside; the first statement. */
    private Read recordedOnly(Read read, List<?> bodies, MessageTransaction invocation) {
        Map<Integer, RejectedMessageException> unrecorded = invocation.firstStatement(() -> {
            Map<Integer, RejectedMessageException> refused = new HashMap<>();
            for (int index = 0; index < read.events().size(); index++) {
                Checked checked = read.events().get(index);
                if (checked != null && checked.event().movedBack()) {
                    try {
                        checkRecorded(checked.event(), body(bodies.get(index)), invocation.binding());
                    } catch (RejectedMessageException ex) {
                        refused.put(index, ex);
                    }
                }
            }
            return refused;
        });
        if (unrecorded.isEmpty()) {
            return read;
        }
        List<@Nullable Checked> events = new ArrayList<>(read.events());
        Map<ProcessedEventStore.Key, Integer> firstCopies = new LinkedHashMap<>();
        for (int index = 0; index < events.size(); index++) {
            RejectedMessageException refused = unrecorded.get(index);
            if (refused != null) {
                invocation.reject(index, refused);
                events.set(index, null);
            } else {
                Checked checked = events.get(index);
                UUID eventId = checked != null ? checked.event().eventId() : null;
                if (checked != null && eventId != null) {
                    firstCopies.putIfAbsent(
                            new ProcessedEventStore.Key(eventId, checked.event().eventName()), index);
                }
            }
        }
        return new Read(events, firstCopies);
    }

    /**
     * Refuses a dead letter moved back to its queue unless the binding dead-lettered that event, with that body,
     * within the dead letters' retention: only then is its route one the broker vouched for.
     */
    private void checkRecorded(IncomingEvent event, byte[] body, GuardedBinding binding) {
        UUID eventId = event.eventId();
        if (eventId == null || !this.deadLetters.recorded(binding.bindingName(), eventId, event.eventName(), body)) {
            throw unrecorded(event);
        }
    }

    private static RejectedMessageException unrecorded(IncomingEvent event) {
        return new RejectedMessageException(
                RejectedMessageException.Reason.UNRECORDED_DEAD_LETTER,
                event.eventId(),
                ("the event %s came back to its queue as a dead letter, by a path that carries no route, but this"
                                + " binding did not dead-letter it with that body, or did longer ago than"
                                + " idempotency.replay-horizon.dead-letter-retention: nothing vouches for the route it"
                                + " first came by")
                        .formatted(event.eventName()));
    }

    /**
     * Records a message the binding is about to dead-letter (a message of a batch comes as a batch of one), if its
     * event was read and its route checked, so that it is taken back when moved back to its queue.
     */
    void recordDeadLetter(GuardedBinding binding, Message<?> message, EventRoutes routes, Duration networkTimeout) {
        IncomingEvent event;
        byte[] body;
        try {
            if (message.getPayload() instanceof List<?> bodies) {
                if (bodies.size() != 1) {
                    return;
                }
                body = body(bodies.get(0));
                event = this.reader.readInBatch(message, 0, body, routes, binding.routeNames());
            } else {
                body = body(message.getPayload());
                event = this.reader.read(message.getHeaders(), body, routes, binding.routeNames());
            }
        } catch (RejectedMessageException ex) {
            return;
        }
        UUID eventId = event.eventId();
        if (eventId != null && !event.movedBack()) {
            this.deadLetters.record(binding.bindingName(), eventId, event.eventName(), body, networkTimeout);
        }
    }

    private static void putInMdc(Read read) {
        Set<UUID> distinct = new LinkedHashSet<>();
        read.firstCopies().keySet().forEach(key -> distinct.add(key.eventId()));
        StringBuilder ids = new StringBuilder(37 * distinct.size());
        for (UUID id : distinct) {
            ids.append(ids.isEmpty() ? "" : ",").append(id);
        }
        MDC.put(EventHeaders.EVENT_ID, ids.toString());
        Set<String> names = new LinkedHashSet<>();
        for (Checked checked : read.events()) {
            if (checked != null) {
                names.add(checked.event().eventName());
            }
        }
        MDC.put(EventHeaders.EVENT_NAME, String.join(",", names));
    }

    /** The first deliveries of a batch, in order, and how many have no id (they pass through unguarded). */
    private record FirstDeliveries(List<MessageTransaction.Delivery> deliveries, int unguarded) {}

    /** The events for the business function: each id's first copy claimed now, and each event without an id. */
    private FirstDeliveries firstDeliveries(
            Message<Object> delivered, Read read, Set<ProcessedEventStore.Key> claimed, MessageTransaction invocation) {
        List<MessageTransaction.Delivery> firstDeliveries = new ArrayList<>(claimed.size());
        int unguarded = 0;
        for (int index = 0; index < read.events().size(); index++) {
            Checked checked = read.events().get(index);
            if (checked == null) {
                continue; // rejected
            }
            IncomingEvent event = checked.event();
            UUID eventId = event.eventId();
            ProcessedEventStore.Key key =
                    eventId == null ? null : new ProcessedEventStore.Key(eventId, event.eventName());
            if (key != null && (read.firstCopies().get(key) != index || !claimed.contains(key))) {
                logger.debug(
                        "Discarded event {} ({}): {}",
                        eventId,
                        event.eventName(),
                        read.firstCopies().get(key) != index
                                ? "a copy of an event earlier in the batch"
                                : "already processed by this service");
                continue;
            }
            try {
                Object payload = this.codec.readPayload(event.payload(), checked.type(), event.eventName(), eventId);
                unguarded += eventId == null ? 1 : 0;
                int position = index;
                // Built only for a function that takes one, or for the batch's first event, which the guard returns.
                boolean headers = invocation.binding().takesMessages();
                firstDeliveries.add(new MessageTransaction.Delivery(
                        payload,
                        () -> eventMessage(payload, event, headers ? headersOf(delivered, position) : Map.of())));
            } catch (RejectedMessageException ex) {
                if (key != null) {
                    this.store.unclaim(key, invocation.binding());
                }
                invocation.reject(index, ex);
            }
        }
        return new FirstDeliveries(firstDeliveries, unguarded);
    }

    private record Checked(IncomingEvent event, Type type) {}

    private static MessageHeaders headersOf(Message<Object> delivered, int index) {
        return delivered.getPayload() instanceof List<?>
                ? new MessageHeaders(EventHeaders.ofMessageInBatch(delivered, index))
                : delivered.getHeaders();
    }

    /**
     * The message of one event. Its event headers are the guard's alone, a publisher's dropped: an {@code occurred_at}
     * text beside an envelope without one would fail, on every attempt, a function that reads an {@code Instant}.
     */
    private static Message<Object> eventMessage(Object payload, IncomingEvent event, Map<String, ?> headers) {
        Map<String, Object> eventHeaders = new HashMap<>(headers);
        eventHeaders.remove(EventHeaders.EVENT_ID);
        eventHeaders.remove(EventHeaders.OCCURRED_AT);
        eventHeaders.put(EventHeaders.EVENT_NAME, event.eventName());
        if (event.eventId() != null) {
            eventHeaders.put(EventHeaders.EVENT_ID, event.eventId());
        }
        if (event.occurredAt() != null) {
            eventHeaders.put(EventHeaders.OCCURRED_AT, event.occurredAt());
        }
        // A new id and timestamp, as MessageBuilder gives a message it builds, and no header without a value.
        eventHeaders.remove(MessageHeaders.ID);
        eventHeaders.remove(MessageHeaders.TIMESTAMP);
        eventHeaders.values().removeIf(Objects::isNull);
        return new GenericMessage<>(payload, eventHeaders);
    }

    /**
     * The type the event's payload maps to (mapped only after the claim, for first deliveries); rejects an event the
     * binding does not handle, or whose id no partition can hold.
     */
    private Type checked(IncomingEvent event, GuardedBinding binding) {
        Type type = binding.payloadTypes().typeFor(event);
        if (event.eventId() != null && this.partitions != null) {
            this.partitions.check(event.eventId());
        }
        return type;
    }

    private static byte[] body(Object payload) {
        if (payload instanceof byte[] bytes) {
            return bytes;
        }
        if (payload instanceof String text) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
        throw new RejectedMessageException(
                RejectedMessageException.Reason.NOT_JSON,
                null,
                "the message body is a %s, not bytes"
                        .formatted(payload.getClass().getName()));
    }

    private MessageTransaction currentInvocation() {
        MessageTransaction invocation = MessageTransaction.current();
        if (invocation == null || !TransactionSynchronizationManager.hasResource(this.dataSource)) {
            throw new IllegalStateException(NAME + " ran outside the transaction the library opens around a guarded"
                    + " binding, so its claim could not commit with the business effect. Compose it first in"
                    + " spring.cloud.function.definition (idempotencyGuard|yourFunction) and let the binder"
                    + " deliver the message; do not call it directly.");
        }
        return invocation;
    }
}
