package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import java.util.HashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.LastSubscriberMessageHandler;
import org.springframework.integration.channel.PublishSubscribeChannel;
import org.springframework.integration.handler.BridgeHandler;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHandler;
import org.springframework.util.Assert;

/**
 * The error channel of a guarded binding, the binder's rethrowing {@link LastSubscriberMessageHandler} last. Its bridge
 * to the global {@code errorChannel} (ERROR) forwards no rejection (logged at WARN), nor a delivery settled in place.
 */
final class GuardedErrorChannel extends PublishSubscribeChannel {

    private final Map<MessageHandler, MessageHandler> bridges = new HashMap<>();

    private @Nullable MessageHandler last;

    GuardedErrorChannel() {
        super(true);
    }

    @Override
    public synchronized boolean subscribe(MessageHandler subscriber) {
        MessageHandler handler = subscriber;
        if (subscriber instanceof BridgeHandler bridge) {
            handler = message -> {
                if (!isRejection(message)) {
                    bridge.handleMessage(message);
                }
            };
            this.bridges.put(bridge, handler);
        }
        if (handler instanceof LastSubscriberMessageHandler) {
            Assert.state(this.last == null, "Only one LastSubscriberMessageHandler is allowed");
            this.last = handler;
            return super.subscribe(handler);
        }
        if (this.last == null) {
            return super.subscribe(handler);
        }
        super.unsubscribe(this.last);
        boolean subscribed = super.subscribe(handler);
        super.subscribe(this.last);
        return subscribed;
    }

    @Override
    public synchronized boolean unsubscribe(MessageHandler subscriber) {
        MessageHandler handler = this.bridges.getOrDefault(subscriber, subscriber);
        this.bridges.remove(subscriber);
        if (handler == this.last) {
            this.last = null;
        }
        return super.unsubscribe(handler);
    }

    /** A delivery settled in place reaches no handler: the binder's recovery ends normally, and acknowledges it. */
    @Override
    protected boolean doSend(Message<?> message, long timeout) {
        return OutageGiveBack.isSettled(message) || super.doSend(message, timeout);
    }

    private static boolean isRejection(Message<?> message) {
        return message.getPayload() instanceof Throwable failure
                && (Failures.find(failure, RejectedMessageException.class) != null
                        || Failures.find(failure, PartlyFailedBatch.class) != null);
    }
}
