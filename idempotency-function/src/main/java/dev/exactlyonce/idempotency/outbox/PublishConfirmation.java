package dev.exactlyonce.idempotency.outbox;

import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.messaging.support.MessageBuilder;

/**
 * How a destination's binder tells the relay that the broker has a row: one per binder the library knows (a row of
 * another binder counts as confirmed once the binder took it). Not API: it may change in any release.
 */
public interface PublishConfirmation {

    /**
     * Sets the destination's producer up to confirm, if its extended producer properties are this binder's.
     *
     * @return whether they are
     * @throws dev.exactlyonce.idempotency.internal.StartupRefusal when the binder cannot confirm
     */
    boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties);

    /** Whether this binder's producer properties already have what the relay needs (set by the service). */
    boolean prepared(Object producerProperties);

    /** Whether a send returns only once the broker answered: the relay then sends from a thread per row in flight. */
    boolean waitsForTheBroker();

    /**
     * Publishes a row's envelope through the binder's own client, completing with the broker's answer; {@code null}
     * leaves the send to the destination's binding ({@code StreamBridge}, with {@link #answer}).
     */
    default @Nullable CompletableFuture<Answer> publish(
            String destination, byte[] envelope, UUID eventId, String eventName) {
        return null;
    }

    /** Adds what the binder needs to the row's message, before it is sent; completes with the broker's answer. */
    CompletableFuture<Answer> answer(MessageBuilder<byte[]> message, UUID eventId, String key);

    /** What a send that threw says of the row (the exception's chain of causes searched). */
    Verdict failed(Throwable failure);

    /** What the broker's answer, or a failed send, says of a row: only {@link #ROW_REFUSED} counts an attempt. */
    enum Verdict {
        CONFIRMED,

        /** Refused for what the row is, and would be again: over the size limit, a payload that cannot be sent. */
        ROW_REFUSED,

        /** Refused for where it goes, as every row of its route: a missing exchange, a forbidden key, a full queue. */
        ROUTE_REFUSED,

        /** Not answered: the broker cannot be reached, is slow, or the connection was lost. */
        UNANSWERED,

        /** Tells neither: the row's refusal when other rows of its destination go through, else the broker's. */
        UNEXPLAINED
    }

    /** The broker's answer about a row: its verdict, and why when it is not {@link Verdict#CONFIRMED}. */
    record Answer(@Nullable String failure, Verdict verdict) {

        public static final Answer CONFIRMED = new Answer(null, Verdict.CONFIRMED);
    }
}
