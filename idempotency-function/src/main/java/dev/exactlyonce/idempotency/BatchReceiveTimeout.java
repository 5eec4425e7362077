package dev.exactlyonce.idempotency;

import java.time.Duration;
import java.util.Objects;
import org.springframework.amqp.rabbit.listener.MessageListenerContainer;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.config.ListenerContainerCustomizer;

/**
 * Bounds the age of a batch on the RabbitMQ listener containers of guarded batch bindings: a batch is handed on when
 * it is full or once {@code idempotency.batch.max-wait} has passed since the container started gathering it,
 * whichever comes first. Without it, a batch is handed on only when full or when no message comes for a whole
 * {@code receive-timeout}, so at a steady low rate every event waits about the time a batch takes to fill.
 *
 * <p>The RabbitMQ binder applies every {@code ListenerContainerCustomizer} bean, the service's own as well.
 */
final class BatchReceiveTimeout implements ListenerContainerCustomizer<MessageListenerContainer> {

    private final Duration maxWait;

    private final ObjectProvider<GuardedBindings> guardedBindings;

    private final BindingServiceProperties bindings;

    BatchReceiveTimeout(
            Duration maxWait, ObjectProvider<GuardedBindings> guardedBindings, BindingServiceProperties bindings) {
        this.maxWait = maxWait;
        this.guardedBindings = guardedBindings;
        this.bindings = bindings;
    }

    @Override
    public void configure(MessageListenerContainer container, String destinationName, String group) {
        if (this.maxWait.isZero()
                || !(container instanceof SimpleMessageListenerContainer simple)
                || !simple.isConsumerBatchEnabled()
                || !isGuardedBatchGroup(group)) {
            return;
        }
        simple.setBatchReceiveTimeout(this.maxWait.toMillis());
    }

    private boolean isGuardedBatchGroup(String group) {
        GuardedBindings guarded = this.guardedBindings.getIfAvailable();
        return guarded != null
                && guarded.bindings().stream()
                        .filter(GuardedBinding::batch)
                        .anyMatch(binding -> Objects.equals(
                                this.bindings
                                        .getBindingProperties(binding.bindingName())
                                        .getGroup(),
                                group));
    }
}
