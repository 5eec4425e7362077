package dev.exactlyonce.idempotency;

import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;
import org.springframework.util.ClassUtils;

/**
 * First on a guarded binding's error channel, where the binder sends a message it gives up on: a message whose
 * failure is an outage is neither dead-lettered nor logged as an error. Unless its attempt was held already, it is held
 * while consumption is halted (up to {@code max-hold}); then it is given back to the binder with an exception that
 * makes the broker deliver it again:
 * RabbitMQ's {@code ImmediateRequeueAmqpException} (the container requeues it with {@code basic.nack}, which RabbitMQ
 * 4.3 and later do not count against a quorum queue's delivery limit); on Kafka, any exception makes the container
 * seek back to the record. Which is picked by the binder the binding uses, not by what is on the class path.
 */
final class OutageGiveBack implements ChannelInterceptor {

    private static final boolean AMQP =
            ClassUtils.isPresent("org.springframework.amqp.ImmediateRequeueAmqpException", null);

    private static final boolean RABBIT_BINDER =
            ClassUtils.isPresent("org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder", null);

    private final Outage outage;

    private final String bindingName;

    /** Whether the binding's binder is RabbitMQ's. */
    private final boolean rabbit;

    /**
     * @param binder the binder of the binding
     */
    OutageGiveBack(Outage outage, String bindingName, Object binder) {
        this.outage = outage;
        this.bindingName = bindingName;
        this.rabbit = RABBIT_BINDER && Rabbit.binds(binder);
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
    RuntimeException givenBack(String reason, Throwable failure) {
        return this.rabbit ? Rabbit.givenBack(reason, failure) : new OutageException(reason, failure);
    }

    /** Whether the library gave the delivery back: the exception it gives back with is in the failure's chain. */
    static boolean isGivenBack(Throwable failure) {
        return Failures.first(failure, cause -> cause instanceof OutageException) != null
                || isGivenBackToRabbit(failure);
    }

    /** Whether the library gave the delivery back to RabbitMQ's listener container: with its own exception. */
    static boolean isGivenBackToRabbit(Throwable failure) {
        return AMQP && Failures.first(failure, Rabbit::isGivenBack) != null;
    }

    /**
     * Loaded only when Spring AMQP is there: the signatures of {@code OutageGiveBack}'s own methods name none of its
     * classes, so that a service without it (on Kafka) loads none.
     */
    private static final class Rabbit {

        static boolean binds(Object binder) {
            return binder instanceof org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder;
        }

        static RuntimeException givenBack(String reason, Throwable failure) {
            return new RabbitGivenBack(reason, failure);
        }

        static boolean isGivenBack(Throwable failure) {
            return failure instanceof RabbitGivenBack;
        }
    }

    /**
     * What the library gives back with when Spring AMQP is there: the container requeues it; its own type lets the
     * library tell its give-backs from an {@code ImmediateRequeueAmqpException} the service throws.
     */
    private static final class RabbitGivenBack extends org.springframework.amqp.ImmediateRequeueAmqpException {

        private static final long serialVersionUID = 1L;

        RabbitGivenBack(String reason, Throwable failure) {
            super(reason, failure);
        }
    }
}
