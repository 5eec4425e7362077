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

    /** Whether a send returns only once the broker answered: the relay then sends from a thread per row in flight. */
    boolean waitsForTheBroker();

    /** Adds what the binder needs to the row's message, before it is sent; completes with the broker's answer. */
    CompletableFuture<Answer> answer(MessageBuilder<byte[]> message, UUID eventId, String key);

    /** Whether a send that failed so says nothing of the row: the broker not reached, or not answering. */
    boolean unanswered(Throwable failure);

    /**
     * The broker's answer about a row: confirmed (no failure), or a failure, {@code refused} when it was the broker's
     * answer about this row.
     */
    record Answer(@Nullable String failure, boolean refused) {

        public static final Answer CONFIRMED = new Answer(null, false);
    }
}
