package dev.exactlyonce.idempotency.binder.rabbit;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.guard.EventRoutes;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitConsumerProperties;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.messaging.MessageHeaders;

/**
 * A RabbitMQ message's route: the routing key it was published with, read from the message the binder received
 * ({@code sourceData}), whose properties the publisher cannot set. Its mapped headers are not to be trusted for this:
 * a header the publisher named {@code amqp_receivedRoutingKey} (or {@code amqp_receivedExchange},
 * {@code amqp_consumerQueue}) replaces the broker's value among them.
 */
final class RabbitEventRoutes implements EventRoutes {

    /**
     * The suffix of a queue's replay exchange, {@code <queue>.replay}: a direct exchange bound to the queue and its
     * dead-letter queue only, that dead letters are moved back through by a user that may write nothing else.
     */
    static final String REPLAY_EXCHANGE_SUFFIX = ".replay";

    @Override
    public boolean binds(Object binder, @Nullable Object consumerProperties) {
        return consumerProperties instanceof RabbitConsumerProperties;
    }

    @Override
    public @Nullable String route(MessageHeaders headers) {
        if (headers.get(IntegrationMessageHeaderAccessor.SOURCE_DATA) instanceof Message source) {
            return route(source);
        }
        if (!headers.containsKey(AmqpHeaders.RECEIVED_ROUTING_KEY)) {
            return null;
        }
        // Without the received message (a binder that does not hand it on): the mapped headers, the best there is.
        return publishedRoutingKey(
                text(headers.get(AmqpHeaders.RECEIVED_EXCHANGE)),
                text(headers.get(AmqpHeaders.RECEIVED_ROUTING_KEY)),
                text(headers.get(AmqpHeaders.CONSUMER_QUEUE)),
                headers);
    }

    /**
     * The message of a batch as received, taken from the batch's list of them ({@code sourceData}): no headers of its
     * own are built for it.
     */
    @Override
    public @Nullable String route(org.springframework.messaging.Message<?> batch, int index) {
        if (batch.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA) instanceof List<?> received
                && batch.getPayload() instanceof List<?> bodies
                && received.size() == bodies.size()
                && received.get(index) instanceof Message source) {
            return route(source);
        }
        return EventRoutes.super.route(batch, index);
    }

    private static @Nullable String route(Message received) {
        MessageProperties properties = received.getMessageProperties();
        return publishedRoutingKey(
                properties.getReceivedExchange(),
                properties.getReceivedRoutingKey(),
                properties.getConsumerQueue(),
                properties.getHeaders());
    }

    /** The routing key: an event is published under its own name. */
    @Override
    public @Nullable String eventName(MessageHeaders headers) {
        return route(headers);
    }

    /**
     * The routing key the event was published with. A message that arrives through the default exchange, or through
     * its queue's replay exchange ({@code <queue>.replay}), was sent to its queue directly (a dead letter moved back
     * to its queue), with the queue's name as routing key: the event's routing key is then the one recorded when it
     * was dead-lettered ({@link RabbitDeadLetters#firstRoutingKey}). Whoever may write to those exchanges may put
     * any event into the queue: give that right to the replay's user alone.
     */
    private static @Nullable String publishedRoutingKey(
            @Nullable String exchange, @Nullable String routingKey, @Nullable String queue, Map<String, ?> headers) {
        boolean replayed = queue != null && exchange != null && exchange.equals(queue + REPLAY_EXCHANGE_SUFFIX);
        if (!replayed && !"".equals(exchange)) {
            return routingKey;
        }
        // Through the replay exchange, only the replay's user publishes: what it recorded of a dead letter it moved.
        String first = replayed ? text(headers.get(EventHeaders.REPLAYED_ROUTING_KEY)) : null;
        if (first != null) {
            return first;
        }
        String recorded = RabbitDeadLetters.firstRoutingKey(headers);
        return recorded != null ? recorded : routingKey;
    }

    private static @Nullable String text(@Nullable Object value) {
        if (value instanceof byte[] bytes) {
            return new String(bytes, UTF_8);
        }
        return value != null ? value.toString() : null;
    }
}
