package dev.exactlyonce.idempotency.outbox;

import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.messaging.support.MessageBuilder;

/**
 * How a destination's binder tells the relay that the broker has a row: one per binder the library knows, registered
 * by its auto-configuration ({@code binder.rabbit}: publisher confirms; {@code binder.kafka}: a send that waits for the
 * broker's acknowledgement, keyed by the row's key). A row sent to a destination of another binder counts as confirmed
 * once the binder took it.
 *
 * <p>Not API: implemented by the library's binder packages, and may change in any release.
 */
public interface PublishConfirmation {

    /**
     * Sets the destination's producer up to confirm, if its extended producer properties are this binder's.
     *
     * @return whether they are
     * @throws dev.exactlyonce.idempotency.internal.StartupRefusal when the binder cannot confirm
     */
    boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties);

    /**
     * Whether the producer properties, of this binder, already have what the relay needs (set by the service): a
     * binding of the destination's name bound before the relay could set them up is refused otherwise.
     */
    boolean prepared(Object producerProperties);

    /** Whether a send returns only once the broker answered: the relay then sends from a thread per row in flight. */
    boolean waitsForTheBroker();

    /**
     * Publishes a row's envelope through the binder's own client, where the relay can use one (RabbitMQ: a template
     * on the binder's connection factory, to the exchange the binding would publish to, with its routing key,
     * delivery mode and confirms); completes with the broker's answer. {@code null} leaves the send to the
     * destination's binding ({@code StreamBridge}, with {@link #answer}).
     */
    default @Nullable CompletableFuture<Answer> publish(
            String destination, byte[] envelope, UUID eventId, String eventName) {
        return null;
    }

    /** Adds what the binder needs to the row's message, before it is sent; completes with the broker's answer. */
    CompletableFuture<Answer> answer(MessageBuilder<byte[]> message, UUID eventId, String key);

    /** What a send that threw says of the row (the exception's chain of causes searched). */
    Verdict failed(Throwable failure);

    /**
     * What the broker's answer, or a send that failed, says of a row. Only {@link #ROW_REFUSED} counts an attempt of
     * the row toward parking it: every other failure is the broker's or the destination's condition, which the relay
     * waits out.
     */
    enum Verdict {

        /** The broker has the row. */
        CONFIRMED,

        /** Refused for what the row is, and would be again: a message over the broker's size limit, a payload that cannot be sent. */
        ROW_REFUSED,

        /**
         * Refused for where it goes, as every row of its destination and event name would be: a missing exchange or
         * topic, a routing key the user may not publish, a full queue that rejects what it is given.
         */
        ROUTE_REFUSED,

        /** Not answered: the broker cannot be reached, is slow, or the connection was lost. */
        UNANSWERED,

        /**
         * A failure that tells neither: the row's refusal when other rows of its destination go through, the broker's
         * condition otherwise.
         */
        UNEXPLAINED
    }

    /** The broker's answer about a row: its verdict, and why when it is not {@link Verdict#CONFIRMED}. */
    record Answer(@Nullable String failure, Verdict verdict) {

        public static final Answer CONFIRMED = new Answer(null, Verdict.CONFIRMED);
    }
}
