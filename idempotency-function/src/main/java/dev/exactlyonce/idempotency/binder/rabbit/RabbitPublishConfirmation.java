package dev.exactlyonce.idempotency.binder.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ShutdownSignalException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation;
import java.io.IOException;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.AmqpAuthenticationException;
import org.springframework.amqp.AmqpConnectException;
import org.springframework.amqp.AmqpIOException;
import org.springframework.amqp.AmqpResourceNotAvailableException;
import org.springframework.amqp.AmqpTimeoutException;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.amqp.support.converter.MessageConversionException;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitProducerProperties;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The relay's rows on RabbitMQ: routed by the event's name, with the event id as {@code message_id}, and a publisher
 * confirm per row (the producer's {@code use-confirm-header}; the connection factory must correlate confirms). A
 * channel closed with 406 (over the size limit) refuses the row; 403, 404 and a {@code basic.nack} (a full queue)
 * refuse its route; a connection lost, or refused, says nothing of it ({@link #failed}).
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
    public boolean prepared(Object producerProperties) {
        return producerProperties instanceof RabbitProducerProperties rabbit && rabbit.isUseConfirmHeader();
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
                    ex != null ? Verdict.UNANSWERED : nacked(reason));
        });
    }

    /**
     * A {@code basic.nack} without a reason comes from a queue that rejects what it is given (full, with
     * {@code reject-publish}): every row routed there is refused until it has room. A channel the broker closed is the
     * broker's answer to what was published on it: 406, this message (over the size limit); 403 or 404, its route (a
     * routing key the user may not publish, a missing exchange). Anything else (a connection lost, the channel closed
     * by the client) says nothing of the row.
     */
    private static Verdict nacked(@Nullable String reason) {
        if (reason == null) {
            return Verdict.ROUTE_REFUSED;
        }
        Matcher code = REPLY_CODE.matcher(reason);
        return code.find() ? closedWith(Integer.parseInt(code.group(1))) : Verdict.UNANSWERED;
    }

    private static Verdict closedWith(int replyCode) {
        return switch (replyCode) {
            case AMQP.PRECONDITION_FAILED -> Verdict.ROW_REFUSED;
            case AMQP.ACCESS_REFUSED, AMQP.NOT_FOUND -> Verdict.ROUTE_REFUSED;
            default -> Verdict.UNANSWERED;
        };
    }

    /**
     * A send refused on a channel the broker had closed for an earlier publication tells that close's reason; a
     * message the client cannot convert is the row's; the broker not reached, not answering, or refusing the
     * connection is the broker's condition; anything else tells neither.
     */
    @Override
    public Verdict failed(Throwable failure) {
        ShutdownSignalException shutdown = Failures.find(failure, ShutdownSignalException.class);
        if (shutdown != null && !shutdown.isHardError() && shutdown.getReason() instanceof AMQP.Channel.Close close) {
            return closedWith(close.getReplyCode());
        }
        if (Failures.first(failure, BROKER_CONDITIONS) != null) {
            return Verdict.UNANSWERED;
        }
        return Failures.find(failure, MessageConversionException.class) != null
                        || Failures.find(
                                        failure,
                                        org.springframework.messaging.converter.MessageConversionException.class)
                                != null
                ? Verdict.ROW_REFUSED
                : Verdict.UNEXPLAINED;
    }

    /** Failures of the connection to the broker, whatever the message. */
    private static final Predicate<Throwable> BROKER_CONDITIONS = failure -> failure instanceof AmqpConnectException
            || failure instanceof AmqpIOException
            || failure instanceof AmqpTimeoutException
            || failure instanceof AmqpAuthenticationException
            || failure instanceof AmqpResourceNotAvailableException
            || failure instanceof ShutdownSignalException
            || failure instanceof IOException
            || failure instanceof TimeoutException;
}
