package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.internal.Failures;
import org.jspecify.annotations.Nullable;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * First on a guarded binding's error channel, where the binder sends a message it gives up on: a message whose
 * failure is an outage is neither dead-lettered nor logged as an error. Unless its attempt was held already, it is held
 * while consumption is halted (up to {@code max-hold}); then it is given back to the binder with an exception that
 * makes the broker deliver it again:
 * RabbitMQ's {@code ImmediateRequeueAmqpException} (the container requeues it with {@code basic.nack}, which RabbitMQ
 * 4.3 and later do not count against a quorum queue's delivery limit); on Kafka, any exception makes the container
 * seek back to the record. Which is picked by the binder the binding uses, not by what is on the class path.
 */
public final class OutageGiveBack implements ChannelInterceptor {

    private final Outage outage;

    private final String bindingName;

    /** The binding's binder's own give-back, if it has one. */
    private final @Nullable BinderGiveBack ownGiveBack;

    /**
     * @param ownGiveBack the binding's binder's own give-back; {@code null} for a binder that takes an
     *     {@link OutageException}
     */
    public OutageGiveBack(Outage outage, String bindingName, @Nullable BinderGiveBack ownGiveBack) {
        this.outage = outage;
        this.bindingName = bindingName;
        this.ownGiveBack = ownGiveBack;
    }

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error) || !this.outage.isOutage(error.getPayload())) {
            return message;
        }
        Throwable failure = error.getPayload();
        this.outage.detected(failure);
        if (Failures.find(failure, OutageException.class) == null) {
            // Not given up by a hold: the attempt found the outage on its own (its last one). Held what is left of
            // the delivery's max-hold; it ends as soon as the database answers, and the delivery that follows may be
            // the one that tries it.
            this.outage.awaitAnswer(this.outage.holdLeft(this.bindingName));
        }
        String reason =
                "A dependency is unavailable: the message is given back to be delivered again, not" + " dead-lettered";
        this.outage.givenBack();
        this.outage.delivered();
        throw givenBack(reason, failure);
    }

    /**
     * The exception that gives a message of the binding back to the broker, to be delivered again, neither
     * dead-lettered nor skipped: on RabbitMQ requeued with {@code basic.nack}; on Kafka the container seeks back to it.
     */
    public RuntimeException givenBack(String reason, Throwable failure) {
        return this.ownGiveBack != null
                ? this.ownGiveBack.givenBack(reason, failure)
                : new OutageException(reason, failure);
    }

    /**
     * Whether the library gave the delivery back with an {@link OutageException} (a binder's own give-back tells its
     * own): it is in the failure's chain.
     */
    public static boolean isGivenBack(Throwable failure) {
        return Failures.first(failure, cause -> cause instanceof OutageException) != null;
    }
}
