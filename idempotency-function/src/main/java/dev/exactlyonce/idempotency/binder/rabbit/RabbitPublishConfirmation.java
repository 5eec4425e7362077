package dev.exactlyonce.idempotency.binder.rabbit;

import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.AmqpConnectException;
import org.springframework.amqp.AmqpIOException;
import org.springframework.amqp.AmqpTimeoutException;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitProducerProperties;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The relay's rows on RabbitMQ: routed by the event's name, with the event id as {@code message_id}, and a publisher
 * confirm per row (the producer's {@code use-confirm-header}; the connection factory must correlate confirms). A
 * {@code basic.nack}, or a channel the broker closed for this publication, is a refusal of the row; a connection lost
 * says nothing of it.
 */
final class RabbitPublishConfirmation implements PublishConfirmation {

    private static final String ROUTING_KEY = "headers['" + EventHeaders.EVENT_NAME + "']";

    /** The reply code of a channel closed by the broker. */
    private static final Pattern REPLY_CODE = Pattern.compile("channel error.*reply-code=(\\d+)");

    @Override
    public boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties) {
        if (!(producerProperties instanceof RabbitProducerProperties rabbit)) {
            return false;
        }
        check(binder, destination);
        rabbit.setUseConfirmHeader(true);
        if (rabbit.getRoutingKeyExpression() == null) {
            rabbit.setRoutingKeyExpression(new SpelExpressionParser().parseExpression(ROUTING_KEY));
        }
        return true;
    }

    private static void check(Binder<?, ?, ?> binder, String destination) {
        if (!(binder instanceof RabbitMessageChannelBinder rabbit)) {
            return;
        }
        if (!rabbit.getConnectionFactory().isPublisherConfirms()) {
            throw new StartupRefusal(
                    ("The outbox relay publishes to %s on RabbitMQ, whose connection factory does not correlate"
                                    + " publisher confirms: the relay marks a row published once the broker"
                                    + " confirmed it, so it would mark none, and publish every row again on"
                                    + " every run")
                            .formatted(destination),
                    "Set spring.rabbitmq.publisher-confirm-type: correlated (the library's default when it is"
                            + " not set), or, if another process publishes the outbox, turn the relay off:"
                            + " idempotency.outbox.relay.enabled: false");
        }
        RabbitPublisherChannels.install(rabbit.getConnectionFactory());
    }

    @Override
    public boolean waitsForTheBroker() {
        return false;
    }

    @Override
    public CompletableFuture<Answer> answer(MessageBuilder<byte[]> message, UUID eventId, String key) {
        CorrelationData correlation = new CorrelationData(eventId.toString());
        message.setHeader(AmqpHeaders.PUBLISH_CONFIRM_CORRELATION, correlation)
                .setHeader(AmqpHeaders.MESSAGE_ID, eventId.toString());
        return correlation.getFuture().handle((confirm, ex) -> {
            if (ex == null && confirm.ack()) {
                return Answer.CONFIRMED;
            }
            String reason = ex != null ? ex.toString() : confirm.reason();
            return new Answer(
                    "the broker refused (nack) event %s%s".formatted(eventId, reason != null ? ": " + reason : ""),
                    ex == null && refusedByTheBroker(reason));
        });
    }

    /**
     * A {@code basic.nack} without a reason is the broker's answer about this message (a full queue that rejects what
     * it is given, say); a channel the broker closed with 403, 404 or 406 was closed for this publication (a routing
     * key the user may not publish, a missing exchange, a message over the size limit). Anything else (a connection
     * lost, the channel closed by the client) says nothing of the row.
     */
    private static boolean refusedByTheBroker(@Nullable String reason) {
        if (reason == null) {
            return true;
        }
        Matcher code = REPLY_CODE.matcher(reason);
        return code.find() && List.of("403", "404", "406").contains(code.group(1));
    }

    @Override
    public boolean unanswered(Throwable failure) {
        return failure instanceof AmqpConnectException
                || failure instanceof AmqpIOException
                || failure instanceof AmqpTimeoutException;
    }
}
