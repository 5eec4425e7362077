package dev.exactlyonce.idempotency.binder.rabbit;

import dev.exactlyonce.idempotency.guard.GuardInstaller;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.MessageListenerContainer;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.config.ListenerContainerCustomizer;
import org.springframework.util.ErrorHandler;

/**
 * The RabbitMQ binder's listener containers: a give-back is not logged at WARN with a stack trace, headers a publisher
 * set under the binder's names of the route are removed, a guarded batch ends at {@code idempotency.batch.max-wait}.
 */
final class RabbitContainers implements ListenerContainerCustomizer<MessageListenerContainer> {

    private static final Logger logger = LoggerFactory.getLogger(RabbitContainers.class);

    /** What the binder hands on of a delivery as the broker gave it: never a publisher's to set. */
    private static final List<String> BROKERS_OWN =
            List.of(AmqpHeaders.RECEIVED_ROUTING_KEY, AmqpHeaders.RECEIVED_EXCHANGE, AmqpHeaders.CONSUMER_QUEUE);

    private final Duration maxWait;

    private final ObjectProvider<GuardInstaller> guardedBindings;

    private final BindingServiceProperties bindings;

    public RabbitContainers(
            Duration maxWait, ObjectProvider<GuardInstaller> guardedBindings, BindingServiceProperties bindings) {
        this.maxWait = maxWait;
        this.guardedBindings = guardedBindings;
        this.bindings = bindings;
    }

    @Override
    public void configure(MessageListenerContainer container, String destinationName, String group) {
        if (container instanceof AbstractMessageListenerContainer listening) {
            quietGiveBacks(listening);
            listening.addAfterReceivePostProcessors(RabbitContainers::withoutForgedRoute);
        }
        if (this.maxWait.isZero()
                || !(container instanceof SimpleMessageListenerContainer simple)
                || !simple.isConsumerBatchEnabled()
                || !isGuardedBatchGroup(group)) {
            return;
        }
        simple.setBatchReceiveTimeout(this.maxWait.toMillis());
    }

    /** The binder maps these over the broker's values: a neighbour could name an event's route for it. */
    private static Message withoutForgedRoute(Message message) {
        Map<String, @Nullable Object> headers = message.getMessageProperties().getHeaders();
        BROKERS_OWN.forEach(headers::remove);
        return message;
    }

    /** Only the library throws the exception it looks for: an unguarded binding's container is left as it was. */
    private static void quietGiveBacks(AbstractMessageListenerContainer container) {
        ErrorHandler handler = container.getErrorHandler();
        container.setErrorHandler(failure -> {
            if (RabbitGiveBack.isGivenBack(failure)) {
                logger.debug("A delivery was given back to the broker, to be delivered again: {}", failure.toString());
                return;
            }
            handler.handleError(failure);
        });
    }

    private boolean isGuardedBatchGroup(String group) {
        GuardInstaller guarded = this.guardedBindings.getIfAvailable();
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
