package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.springframework.messaging.Message;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;

/**
 * The composed invocation of a guarded binding under way on this thread: its binding, its transaction and what the
 * guard found. Opened and closed by {@link TransactionPerMessage}; at most one per thread.
 */
final class MessageTransaction {

    private static final Logger logger = LoggerFactory.getLogger(MessageTransaction.class);

    private static final ThreadLocal<MessageTransaction> CURRENT = new ThreadLocal<>();

    private final GuardedBinding binding;

    private final PlatformTransactionManager transactionManager;

    /** The message's transaction: begun again when its first statement meets an outage. */
    private TransactionStatus transaction;

    private final Recovery recovery;

    private final @Nullable Outbox outbox;

    private final @Nullable EventRoutes routes;

    private boolean skipBusinessFunctions;

    private int claimed;

    private int duplicates;

    private boolean reachedTheDatabase;

    private final Map<Integer, RejectedMessageException> rejected = new TreeMap<>();

    private List<Delivery> moreEvents = List.of();

    private MessageTransaction(
            GuardedBinding binding,
            PlatformTransactionManager transactionManager,
            TransactionStatus transaction,
            @Nullable Outbox outbox,
            @Nullable EventRoutes routes,
            Recovery recovery) {
        this.binding = binding;
        this.transactionManager = transactionManager;
        this.transaction = transaction;
        this.outbox = outbox;
        this.routes = routes;
        this.recovery = recovery;
    }

    /** How the failures of an invocation are met, by the {@link TransactionPerMessage} that opened it. */
    interface Recovery {

        /** Begins the message's transaction again after its first statement failed, or throws that failure. */
        TransactionStatus beginAgain(TransactionStatus failed, RuntimeException failure);

        /** What a failure of the business functions, or of what they emit, is thrown as: an outage as an OutageMet. */
        RuntimeException thrown(RuntimeException failure);
    }

    static MessageTransaction open(
            GuardedBinding binding,
            PlatformTransactionManager transactionManager,
            TransactionStatus transaction,
            @Nullable Outbox outbox,
            @Nullable EventRoutes routes,
            Recovery recovery) {
        MessageTransaction invocation =
                new MessageTransaction(binding, transactionManager, transaction, outbox, routes, recovery);
        CURRENT.set(invocation);
        return invocation;
    }

    /** Runs the claim: nothing ran before it, so on an outage the transaction is begun again in the same attempt. */
    <T> T firstStatement(Supplier<T> statement) {
        while (true) {
            try {
                T result = statement.get();
                this.reachedTheDatabase = true;
                return result;
            } catch (RuntimeException ex) {
                this.transaction = this.recovery.beginAgain(this.transaction, ex);
            }
        }
    }

    @Nullable
    EventRoutes routes() {
        return this.routes;
    }

    /** What a failure of the business functions on this thread is thrown as ({@link Recovery#thrown}). */
    static RuntimeException thrown(RuntimeException failure) {
        MessageTransaction current = CURRENT.get();
        return current != null ? current.recovery.thrown(failure) : failure;
    }

    static @Nullable MessageTransaction current() {
        return CURRENT.get();
    }

    /** Rolls back and closes an invocation an {@link Error} left open, so that the next message does not join it. */
    static void rollBackAbandoned() {
        MessageTransaction abandoned = CURRENT.get();
        if (abandoned == null) {
            return;
        }
        logger.error(
                "The transaction of an earlier message of {} was still open on this thread (an Error escaped its"
                        + " invocation); rolling it back before the next message",
                abandoned.binding.bindingName());
        try {
            if (!abandoned.transaction.isCompleted()) {
                abandoned.transactionManager.rollback(abandoned.transaction);
            }
        } catch (TransactionException ex) {
            logger.warn("Could not roll back the abandoned transaction: {}", ex.getMessage());
        } finally {
            abandoned.close();
        }
    }

    /** Whether every event of the invocation on this thread is a copy: its business functions must not run. */
    static boolean skipsBusinessFunctions() {
        MessageTransaction current = CURRENT.get();
        return current != null && current.skipBusinessFunctions;
    }

    GuardedBinding binding() {
        return this.binding;
    }

    TransactionStatus transaction() {
        return this.transaction;
    }

    void skipBusinessFunctions() {
        this.skipBusinessFunctions = true;
    }

    void countClaimed(int events) {
        this.claimed = events;
    }

    void countDuplicates(int copies) {
        this.duplicates = copies;
    }

    /** An event of a batch for its business function: the payload, and its message when the function takes one. */
    record Delivery(Object payload, Supplier<Message<Object>> message) {}

    /** Sets aside a message of the batch that cannot be processed: the rest of the batch goes on without it. */
    void reject(int index, RejectedMessageException rejection) {
        this.rejected.put(index, rejection);
    }

    Map<Integer, RejectedMessageException> rejected() {
        return Collections.unmodifiableMap(this.rejected);
    }

    /** A batch's events after the first, for a function that takes one at a time ({@link GuardedBusinessFunction}). */
    void moreEvents(List<Delivery> events) {
        this.moreEvents = new ArrayList<>(events);
    }

    /** Takes, once, the events still to hand to the business function of that name, composed after the guard. */
    static List<Delivery> takeMoreEvents(String functionName) {
        MessageTransaction current = CURRENT.get();
        if (current == null
                || current.moreEvents.isEmpty()
                || !current.binding.businessFunctions().get(0).equals(functionName)) {
            return List.of();
        }
        List<Delivery> events = current.moreEvents;
        current.moreEvents = List.of();
        return events;
    }

    /**
     * What a business function returned; for the last of the composition, {@code null} once its events were written to
     * the outbox, so that nothing is sent to the output binding before the commit.
     *
     * @throws IdempotencyException when the last function returned something other than events
     */
    static @Nullable Object emit(String functionName, @Nullable Object result) {
        MessageTransaction current = CURRENT.get();
        if (current == null
                || result == null
                || current.binding.outputDestination() == null
                || !current.binding.lastFunction().equals(functionName)) {
            return result;
        }
        if (current.outbox == null) {
            throw new IdempotencyException(
                    "%s returned events, and the service has no outbox to write them to".formatted(functionName));
        }
        if (result instanceof Message<?> message) {
            result = message.getPayload();
        }
        List<OutgoingEvent> events = new ArrayList<>();
        if (result instanceof OutgoingEvent event) {
            events.add(event);
        } else if (result instanceof Iterable<?> results) {
            for (Object each : results) {
                if (!(each instanceof OutgoingEvent event)) {
                    throw notEvents(functionName, each);
                }
                events.add(event);
            }
        } else {
            throw notEvents(functionName, result);
        }
        if (!events.isEmpty()) {
            current.outbox.write(current.binding.outputDestination(), events);
        }
        return null;
    }

    private static IdempotencyException notEvents(String functionName, @Nullable Object result) {
        return new IdempotencyException(("%s returned %s: the result of a guarded function is published through the"
                        + " outbox, after the commit, and must be an OutgoingEvent or a list of them (or null for"
                        + " none)")
                .formatted(
                        functionName,
                        result == null
                                ? "null in a list"
                                : "a " + result.getClass().getName()));
    }

    /** Whether the claim went through: a message rejected before it says nothing of the database. */
    boolean reachedTheDatabase() {
        return this.reachedTheDatabase;
    }

    /** How many events the guard claimed: once the transaction commits, they are processed. */
    int claimed() {
        return this.claimed;
    }

    /** How many copies of processed events the guard discarded: counted once the transaction commits. */
    int duplicates() {
        return this.duplicates;
    }

    void close() {
        MDC.remove(EventHeaders.EVENT_ID);
        MDC.remove(EventHeaders.EVENT_NAME);
        CURRENT.remove();
    }
}
