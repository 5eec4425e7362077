package dev.exactlyonce.idempotency.binder.rabbit;

import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.ImmediateRequeueAmqpException;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitConsumerProperties;

/**
 * Gives a delivery back to RabbitMQ with an {@code ImmediateRequeueAmqpException}, requeued by {@code basic.nack}; a
 * subtype of its own tells the library's give-backs from one the service throws.
 */
final class RabbitGiveBack implements BinderGiveBack {

    @Override
    public boolean binds(Object binder, @Nullable Object consumerProperties) {
        return consumerProperties instanceof RabbitConsumerProperties;
    }

    @Override
    public RuntimeException givenBack(String reason, Throwable failure) {
        return new GivenBack(reason, failure);
    }

    @Override
    public boolean countsReturns() {
        return true;
    }

    /** Whether the library gave the delivery back to the listener container: with its own exception. */
    static boolean isGivenBack(Throwable failure) {
        return Failures.first(failure, cause -> cause instanceof GivenBack) != null;
    }

    private static final class GivenBack extends ImmediateRequeueAmqpException {

        private static final long serialVersionUID = 1L;

        GivenBack(String reason, Throwable failure) {
            super(reason, failure);
        }
    }
}
