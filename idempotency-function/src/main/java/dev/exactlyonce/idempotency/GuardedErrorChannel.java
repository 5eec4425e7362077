package dev.exactlyonce.idempotency;

import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.LastSubscriberMessageHandler;
import org.springframework.integration.channel.PublishSubscribeChannel;
import org.springframework.messaging.MessageHandler;
import org.springframework.util.Assert;

/**
 * The error channel of a guarded binding, registered by the library under the name the binder looks up, so that the
 * binder subscribes its dead-letter handler to it. Like the binder's own, it is publish-subscribe and keeps a
 * {@link LastSubscriberMessageHandler} (the binder's final rethrowing handler) after every other subscriber.
 */
final class GuardedErrorChannel extends PublishSubscribeChannel {

    private @Nullable MessageHandler last;

    GuardedErrorChannel() {
        super(true);
    }

    @Override
    public synchronized boolean subscribe(MessageHandler handler) {
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
    public synchronized boolean unsubscribe(MessageHandler handler) {
        if (handler == this.last) {
            this.last = null;
        }
        return super.unsubscribe(handler);
    }
}
