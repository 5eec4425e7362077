package dev.exactlyonce.idempotency.binder.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ShutdownSignalException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation;
import java.io.IOException;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.AmqpAuthenticationException;
import org.springframework.amqp.AmqpConnectException;
import org.springframework.amqp.AmqpException;
import org.springframework.amqp.AmqpIOException;
import org.springframework.amqp.AmqpResourceNotAvailableException;
import org.springframework.amqp.AmqpTimeoutException;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageDeliveryMode;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.amqp.support.converter.MessageConversionException;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.ExtendedProducerProperties;
import org.springframework.cloud.stream.binder.rabbit.RabbitMessageChannelBinder;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitProducerProperties;
import org.springframework.cloud.stream.binder.rabbit.provisioning.RabbitExchangeQueueProvisioner;
import org.springframework.cloud.stream.provisioning.ProducerDestination;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.messaging.support.MessageBuilder;

/**
 * The relay's rows on RabbitMQ: routed by the event's name, the event id as {@code message_id}, a publisher confirm
 * per row. What each failure says of a row: {@link #failed}; see docs/outbox.md ("What a failure says of a row").
 */
final class RabbitPublishConfirmation implements PublishConfirmation {

    private static final String ROUTING_KEY = "headers['" + EventHeaders.EVENT_NAME + "']";

    /** The reply code of a channel closed by the broker. */
    private static final Pattern REPLY_CODE = Pattern.compile("channel error.*reply-code=(\\d+)");

    /** Where each destination's rows go: its exchange, and how the binding would publish them. */
    private final Map<String, Target> targets = new ConcurrentHashMap<>();

    @Override
    public boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties) {
        if (!(producerProperties instanceof RabbitProducerProperties rabbit)) {
            return false;
        }
        if (binder instanceof RabbitMessageChannelBinder rabbitBinder) {
            check(rabbitBinder, destination);
            this.targets.put(destination, Target.of(rabbitBinder.getConnectionFactory(), destination, rabbit));
        }
        rabbit.setUseConfirmHeader(true);
        if (rabbit.getRoutingKeyExpression() == null) {
            rabbit.setRoutingKeyExpression(new SpelExpressionParser().parseExpression(ROUTING_KEY));
        }
        return true;
    }

    private static void check(RabbitMessageChannelBinder rabbit, String destination) {
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

    /** A template of the binder's connection factory: converting through the binding took most of the relay's time. */
    @Override
    public @Nullable CompletableFuture<Answer> publish(
            String destination, byte[] envelope, UUID eventId, String eventName) {
        Target target = this.targets.get(destination);
        if (target == null) {
            return null;
        }
        CorrelationData correlation = new CorrelationData(eventId.toString());
        target.send(envelope, eventId.toString(), eventName, correlation);
        return answered(correlation, eventId);
    }

    /** A destination's exchange, declared as the binding would, and the binding's delivery mode and routing key. */
    private record Target(
            String exchange,
            RabbitTemplate template,
            MessageDeliveryMode deliveryMode,
            @Nullable Expression routingKey) {

        static Target of(ConnectionFactory connectionFactory, String destination, RabbitProducerProperties producer) {
            ProducerDestination declared = new RabbitExchangeQueueProvisioner(connectionFactory)
                    .provisionProducerDestination(destination, new ExtendedProducerProperties<>(producer));
            RabbitTemplate template = new RabbitTemplate(connectionFactory);
            template.setUsePublisherConnection(connectionFactory.getPublisherConnectionFactory() != null);
            return new Target(
                    declared.getName(), template, producer.getDeliveryMode(), producer.getRoutingKeyExpression());
        }

        void send(byte[] envelope, String eventId, String eventName, CorrelationData correlation) {
            MessageProperties properties = new MessageProperties();
            properties.setContentType(MessageProperties.CONTENT_TYPE_JSON);
            properties.setMessageId(eventId);
            properties.setDeliveryMode(this.deliveryMode);
            properties.setHeader(EventHeaders.EVENT_ID, eventId);
            properties.setHeader(EventHeaders.EVENT_NAME, eventName);
            this.template.send(
                    this.exchange,
                    routingKey(envelope, eventId, eventName),
                    new Message(envelope, properties),
                    correlation);
        }

        private String routingKey(byte[] envelope, String eventId, String eventName) {
            if (this.routingKey == null) {
                return eventName;
            }
            String key = this.routingKey.getValue(
                    MessageBuilder.withPayload(envelope)
                            .setHeader(EventHeaders.EVENT_ID, eventId)
                            .setHeader(EventHeaders.EVENT_NAME, eventName)
                            .build(),
                    String.class);
            return key != null ? key : eventName;
        }
    }

    /** Always: the relay publishes through a template of its own ({@link #publish}), whatever the binding has. */
    @Override
    public boolean prepared(Object producerProperties) {
        return true;
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
        return answered(correlation, eventId);
    }

    private static CompletableFuture<Answer> answered(CorrelationData correlation, UUID eventId) {
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
     * A {@code basic.nack} without a reason (a full {@code reject-publish} queue) refuses the route; a channel the
     * broker closed refuses the row (406) or its route (403, 404); anything else says nothing of the row.
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

    /** A message the client cannot convert is the row's; the broker's conditions below say nothing of it. */
    @Override
    public Verdict failed(Throwable failure) {
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

    /**
     * Connection failures, and what Spring AMQP throws when the broker closed the channel under a send (for an earlier
     * publication, never for this row's content): a plain {@link AmqpException} ("... is closed"), a runtime exception
     * of its template or channel cache ("Listener not registered", a {@link NullPointerException} on the closed
     * channel's target), or the client's {@link ClassCastException} on a reused channel number (spring-amqp#1337).
     */
    private static final Predicate<Throwable> BROKER_CONDITIONS = failure -> failure instanceof AmqpConnectException
            || (failure.getClass() == AmqpException.class
                    && String.valueOf(failure.getMessage()).endsWith("is closed"))
            || (failure instanceof RuntimeException
                    && !(failure instanceof AmqpException)
                    && thrownBy(failure, "org.springframework.amqp.rabbit."))
            || failure instanceof AmqpIOException
            || failure instanceof AmqpTimeoutException
            || failure instanceof AmqpAuthenticationException
            || failure instanceof AmqpResourceNotAvailableException
            || failure instanceof ShutdownSignalException
            || failure instanceof IOException
            || failure instanceof TimeoutException
            || (failure instanceof ClassCastException && thrownBy(failure, "com.rabbitmq.client."));

    /** Whether the first frame of the failure outside the JDK and Spring's assertions is in that package. */
    private static boolean thrownBy(Throwable failure, String packagePrefix) {
        for (StackTraceElement frame : failure.getStackTrace()) {
            String type = frame.getClassName();
            if (!type.startsWith("java.")
                    && !type.startsWith("jdk.")
                    && !type.startsWith("org.springframework.util.")) {
                return type.startsWith(packagePrefix);
            }
        }
        return false;
    }
}
