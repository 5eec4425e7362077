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
 * A RabbitMQ message's route: the routing key of the message the binder received, not its mapped headers, which a
 * publisher can forge; none for a dead letter moved back. See docs/reference.md, "The envelope".
 */
final class RabbitEventRoutes implements EventRoutes {

    /** The suffix of a queue's replay exchange, {@code <queue>.replay}, through which dead letters are moved back. */
    static final String REPLAY_EXCHANGE_SUFFIX = ".replay";

    /** The header of a batch that holds its messages' mapped headers, one map per message. */
    private static final String BATCHED_HEADERS = AmqpInboundChannelAdapter.CONSOLIDATED_HEADERS;

    @Override
    public boolean binds(Object binder, @Nullable Object consumerProperties) {
        return consumerProperties instanceof RabbitConsumerProperties;
    }

    @Override
    public @Nullable String route(MessageHeaders headers) {
        Arrival arrival = arrival(headers);
        return arrival != null ? arrival.route() : null;
    }

    /** From the batch's mapped headers: {@link RabbitContainers} removed what a publisher forged there. */
    @Override
    public @Nullable String route(org.springframework.messaging.Message<?> batch, int index) {
        Arrival arrival = arrival(batch, index);
        return arrival != null ? arrival.route() : null;
    }

    @Override
    public boolean movesDeadLettersBack() {
        return true;
    }

    @Override
    public boolean movedBack(MessageHeaders headers) {
        Arrival arrival = arrival(headers);
        return arrival != null && arrival.movedBack();
    }

    @Override
    public boolean movedBack(org.springframework.messaging.Message<?> batch, int index) {
        Arrival arrival = arrival(batch, index);
        return arrival != null && arrival.movedBack();
    }

    /** The routing key; none for a message moved back, whose {@code event_name} header the guard checks instead. */
    @Override
    public @Nullable String eventName(MessageHeaders headers) {
        return route(headers);
    }

    private static @Nullable Arrival arrival(MessageHeaders headers) {
        if (headers.get(IntegrationMessageHeaderAccessor.SOURCE_DATA) instanceof Message source) {
            MessageProperties properties = source.getMessageProperties();
            return new Arrival(
                    properties.getReceivedExchange(),
                    properties.getReceivedRoutingKey(),
                    properties.getConsumerQueue());
        }
        // Without the received message (a binder that does not hand it on): the mapped headers, the best there is.
        return mappedArrival(headers);
    }

    private static @Nullable Arrival arrival(org.springframework.messaging.Message<?> batch, int index) {
        if (batch.getHeaders().get(BATCHED_HEADERS) instanceof List<?> batched
                && batch.getPayload() instanceof List<?> bodies
                && batched.size() == bodies.size()
                && batched.get(index) instanceof Map<?, ?> own) {
            @SuppressWarnings("unchecked")
            Map<String, ?> headers = (Map<String, ?>) own;
            return mappedArrival(headers);
        }
        return arrival(new MessageHeaders(EventHeaders.ofMessageInBatch(batch, index)));
    }

    private static @Nullable Arrival mappedArrival(Map<String, ?> headers) {
        if (!headers.containsKey(AmqpHeaders.RECEIVED_ROUTING_KEY)) {
            return null;
        }
        return new Arrival(
                text(headers.get(AmqpHeaders.RECEIVED_EXCHANGE)),
                text(headers.get(AmqpHeaders.RECEIVED_ROUTING_KEY)),
                text(headers.get(AmqpHeaders.CONSUMER_QUEUE)));
    }

    /**
     * The exchange, routing key and queue a message was delivered by. One moved back (by the default or replay
     * exchange) has no route the broker vouches for, nor do its {@code x-death} headers.
     */
    private record Arrival(
            @Nullable String exchange,
            @Nullable String routingKey,
            @Nullable String queue) {

        boolean movedBack() {
            return "".equals(this.exchange)
                    || (this.queue != null && (this.queue + REPLAY_EXCHANGE_SUFFIX).equals(this.exchange));
        }

        @Nullable
        String route() {
            return movedBack() ? null : this.routingKey;
        }
    }

    private static @Nullable String text(@Nullable Object value) {
        if (value instanceof byte[] bytes) {
            return new String(bytes, UTF_8);
        }
        return value != null ? value.toString() : null;
    }
}
