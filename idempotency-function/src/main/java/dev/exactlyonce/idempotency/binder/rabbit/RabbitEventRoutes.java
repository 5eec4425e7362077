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
import org.springframework.integration.amqp.inbound.AmqpInboundChannelAdapter;
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

    /** The header of a batch that holds its messages' mapped headers, one map per message. */
    private static final String BATCHED_HEADERS = AmqpInboundChannelAdapter.CONSOLIDATED_HEADERS;

    @Override
    public boolean binds(Object binder, @Nullable Object consumerProperties) {
        return consumerProperties instanceof RabbitConsumerProperties;
    }

    @Override
    public @Nullable String route(MessageHeaders headers) {
        if (headers.get(IntegrationMessageHeaderAccessor.SOURCE_DATA) instanceof Message source) {
            return route(source);
        }
        // Without the received message (a binder that does not hand it on): the mapped headers, the best there is.
        return mappedRoute(headers);
    }

    /**
     * A message of a batch: the binder hands on a batch's messages with their mapped headers only, one map per message
     * ({@code amqp_batchedHeaders}), from which the library removed what a publisher set under the broker's names
     * ({@link RabbitContainers}). Read from that map, with no headers of the message's own built for it.
     */
    @Override
    public @Nullable String route(org.springframework.messaging.Message<?> batch, int index) {
        if (batch.getHeaders().get(BATCHED_HEADERS) instanceof List<?> batched
                && batch.getPayload() instanceof List<?> bodies
                && batched.size() == bodies.size()
                && batched.get(index) instanceof Map<?, ?> own) {
            @SuppressWarnings("unchecked")
            Map<String, ?> headers = (Map<String, ?>) own;
            return mappedRoute(headers);
        }
        return EventRoutes.super.route(batch, index);
    }

    private static @Nullable String mappedRoute(Map<String, ?> headers) {
        if (!headers.containsKey(AmqpHeaders.RECEIVED_ROUTING_KEY)) {
            return null;
        }
        return publishedRoutingKey(
                text(headers.get(AmqpHeaders.RECEIVED_EXCHANGE)),
                text(headers.get(AmqpHeaders.RECEIVED_ROUTING_KEY)),
                text(headers.get(AmqpHeaders.CONSUMER_QUEUE)),
                headers);
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
