package dev.exactlyonce.idempotency.binder.rabbit;

import com.rabbitmq.client.Channel;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.BinderConsumerDefaults;
import dev.exactlyonce.idempotency.guard.ConsumerSettings;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.AmqpException;
import org.springframework.amqp.rabbit.connection.Connection;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitConsumerProperties;

/**
 * What the library sets and checks on a guarded RabbitMQ binding: a dead-letter queue, the exchanges, batches and
 * routing keys. See docs/reference.md, "Configuration".
 */
final class RabbitConsumerDefaults implements BinderConsumerDefaults<RabbitConsumerProperties> {

    /** By name: loaded only where the RabbitMQ binder is. */
    public static final String PROPERTIES =
            "org.springframework.cloud.stream.binder.rabbit.properties.RabbitConsumerProperties";

    /** The batch size of a guarded batch binding that sets none. */
    static final int BATCH_SIZE = 100;

    /** The listener container's own receive timeout, when the binding sets none. */
    private static final long CONTAINER_RECEIVE_TIMEOUT_MS = 1_000;

    /** How long a guarded batch binding that sets no {@code receive-timeout} waits for a batch's next message. */
    static final long RECEIVE_TIMEOUT_MS = 1;

    private static final Logger logger = LoggerFactory.getLogger(RabbitConsumerDefaults.class);

    private final ListableBeanFactory beanFactory;

    private final Duration maxWait;

    private final boolean routeCheck;

    public RabbitConsumerDefaults(ListableBeanFactory beanFactory, IdempotencyProperties properties) {
        this.beanFactory = beanFactory;
        this.maxWait = properties.batch().maxWait();
        this.routeCheck = properties.eventId().routeCheck();
    }

    @Override
    public Class<RabbitConsumerProperties> propertiesType() {
        return RabbitConsumerProperties.class;
    }

    @Override
    public void apply(RabbitConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        binding.requireDeadLetters(
                "auto-bind-dlq",
                consumer.isAutoBindDlq(),
                consumer.isDurableSubscription(),
                "has no group: the binder consumes it through an anonymous queue, deleted, with the events still in"
                        + " it, when the service stops, and gives it no dead-letter queue",
                () -> {
                    refuseQueueWithoutDeadLetters(consumer, binding);
                    consumer.setAutoBindDlq(true);
                });
        if (binding.batch()) {
            setBatchDefaults(consumer, binding);
        }
        checkExchanges(consumer, binding);
        setRoutingKeys(consumer, binding);
    }

    /**
     * Binds the queue with the event names the functions map, unless {@code binding-routing-key} is set: the binder's
     * {@code #} would bring every event of the exchange, each they do not map dead-lettered UNKNOWN_EVENT. Refuses to
     * start where they map none and the queue would be bound to a topic exchange with {@code #}.
     */
    private void setRoutingKeys(RabbitConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        if (binding.eventNames().isEmpty()
                && this.routeCheck
                && consumer.getBindingRoutingKey() == null
                && !binding.isSet("binding-routing-key")
                && !binding.partitioned()
                && !consumer.isSuperStream()
                && "topic".equals(consumer.getExchangeType())) {
            // Fails closed: the binder would bind the queue with #.
            throw new StartupRefusal(
                    ("Binding %s: its functions name no event (their input type has no @EventName), and the service"
                                    + " sets no binding-routing-key: its queue would be bound to the topic exchange"
                                    + " with #, and take every event any publisher sends there, of any name")
                            .formatted(binding.name()),
                    ("Name the events the function takes (@EventName on its input type, or on each permitted type of"
                                    + " a sealed one), or set %s.consumer.binding-routing-key to the routing keys its"
                                    + " queue takes")
                            .formatted(binding.prefix()));
        }
        if (binding.eventNames().isEmpty()
                || !this.routeCheck
                || consumer.getBindingRoutingKey() != null
                || binding.isSet("binding-routing-key")
                || binding.partitioned()
                || consumer.isSuperStream()
                || !("topic".equals(consumer.getExchangeType()) || "direct".equals(consumer.getExchangeType()))) {
            // Routing keys that are not event names, or an exchange that routes by no key.
            return;
        }
        String delimiter = consumer.getBindingRoutingKeyDelimiter();
        if (delimiter == null) {
            delimiter = ",";
            consumer.setBindingRoutingKeyDelimiter(delimiter);
        }
        String keys = String.join(delimiter, new TreeSet<>(binding.eventNames()));
        consumer.setBindingRoutingKey(keys);
        logger.info(
                "Binding {} binds its queue with the events its functions map ({}); set {}.consumer"
                        + ".binding-routing-key to bind it otherwise",
                binding.name(),
                keys,
                binding.prefix());
    }

    /**
     * Sets the container's batching ({@code enable-batching}, {@code batch-size}, {@code receive-timeout},
     * {@code prefetch}), each unless set, and shortens a {@code receive-timeout} longer than max-wait to it;
     * {@link RabbitContainers} ends a batch at max-wait. See docs/batch-mode.md.
     */
    private void setBatchDefaults(RabbitConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        if (!binding.isSet("enable-batching")) {
            consumer.setEnableBatching(true);
        }
        if (!binding.isSet("batch-size")) {
            consumer.setBatchSize(BATCH_SIZE);
        }
        if (!this.maxWait.isZero() && !binding.isSet("receive-timeout")) {
            consumer.setReceiveTimeout(RECEIVE_TIMEOUT_MS);
        }
        // Set after batch-size, which it follows.
        if (!binding.isSet("prefetch")) {
            consumer.setPrefetch(2 * consumer.getBatchSize());
        }
        // The container checks a batch's age between messages only: a longer receive-timeout would outlast max-wait.
        long receiveTimeout =
                consumer.getReceiveTimeout() != null ? consumer.getReceiveTimeout() : CONTAINER_RECEIVE_TIMEOUT_MS;
        if (!this.maxWait.isZero() && receiveTimeout > this.maxWait.toMillis()) {
            consumer.setReceiveTimeout(Math.max(1, this.maxWait.toMillis()));
            logger.info(
                    "Binding {} waits at most idempotency.batch.max-wait ({}) for a batch's next message, not its"
                            + " receive-timeout ({} ms): the listener container checks a batch's age only between two"
                            + " messages",
                    binding.name(),
                    this.maxWait,
                    receiveTimeout);
        }
        if (!consumer.isRepublishToDlq()) {
            logger.warn(
                    "Binding {} delivers batches without republish-to-dlq: RabbitMQ then rejects a failed batch whole,"
                            + " to its dead-letter queue with the events the batch processed. Leave republish-to-dlq"
                            + " on, so that only the messages that fail go there",
                    binding.name());
        }
    }

    /** The broker cannot add a dead-letter queue to an existing queue; a broker it cannot ask passes. */
    private void refuseQueueWithoutDeadLetters(
            RabbitConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        if (binding.partitioned()) {
            return;
        }
        for (String destination : binding.destinations()) {
            String queue = consumer.getPrefix()
                    + (consumer.isQueueNameGroupOnly() ? binding.group() : destination + "." + binding.group());
            String dlq = consumer.getDeadLetterQueueName() != null ? consumer.getDeadLetterQueueName() : queue + ".dlq";
            if (existsWithout(queue, dlq)) {
                throw new StartupRefusal(
                        ("Binding %s has no dead-letter queue: its queue %s exists without %s. If the queue was"
                                        + " declared without a dead-letter exchange (by a version that ran without"
                                        + " one), RabbitMQ refuses to declare it again with one, and the broker would"
                                        + " drop the messages the guard rejects")
                                .formatted(binding.name(), queue, dlq),
                        ("Drain the queue and delete it, so that the binder declares it again with its dead-letter"
                                        + " queue; if only %s was deleted, set %s.consumer.auto-bind-dlq=true to have"
                                        + " the binder declare it again; or, to consume without one, set it to false")
                                .formatted(dlq, binding.prefix()));
            }
        }
    }

    /** Refuses a binding that declares no exchange ({@code declare-exchange}, {@code declare-dlx}) and finds none. */
    private void checkExchanges(RabbitConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        List<String> expected = new ArrayList<>();
        if (!consumer.isDeclareExchange()) {
            binding.destinations().forEach(destination -> expected.add(consumer.getPrefix() + destination));
        }
        if (consumer.isAutoBindDlq() && !consumer.isDeclareDlx()) {
            expected.add(
                    consumer.getDeadLetterExchange() != null
                            ? consumer.getDeadLetterExchange()
                            : consumer.getPrefix() + "DLX");
        }
        List<String> missing = missingExchanges(expected);
        if (!missing.isEmpty()) {
            throw new StartupRefusal(
                    ("Binding %s declares no exchange (declare-exchange: false, declare-dlx: false), and the broker has"
                                    + " none named %s: its queue would receive nothing, or its dead letters would be"
                                    + " lost")
                            .formatted(binding.name(), missing),
                    "Declare them in the broker's definitions (infra/rabbitmq/definitions.json shows the shop's), or"
                            + " let the binding declare them with a broker user that may configure them");
        }
    }

    /** The exchanges of those names the broker does not have; none when it cannot be asked. */
    private List<String> missingExchanges(List<String> exchanges) {
        ConnectionFactory connectionFactory =
                this.beanFactory.getBeanProvider(ConnectionFactory.class).getIfUnique();
        if (connectionFactory == null || exchanges.isEmpty()) {
            return List.of();
        }
        List<String> missing = new ArrayList<>();
        try (Connection connection = connectionFactory.createConnection()) {
            for (String exchange : exchanges) {
                try (Channel channel = connection.createChannel(false)) {
                    channel.exchangeDeclarePassive(exchange);
                } catch (IOException ex) {
                    missing.add(exchange);
                } catch (TimeoutException ex) {
                    logger.debug("Could not tell whether exchange {} exists: {}", exchange, ex.getMessage());
                }
            }
        } catch (AmqpException ex) {
            logger.debug("Could not tell whether exchanges {} exist: {}", exchanges, ex.getMessage());
        }
        return missing;
    }

    private boolean existsWithout(String queue, String deadLetterQueue) {
        ConnectionFactory connectionFactory =
                this.beanFactory.getBeanProvider(ConnectionFactory.class).getIfUnique();
        if (connectionFactory == null) {
            return false;
        }
        try {
            RabbitAdmin admin = new RabbitAdmin(connectionFactory);
            return admin.getQueueInfo(queue) != null && admin.getQueueInfo(deadLetterQueue) == null;
        } catch (AmqpException ex) {
            logger.debug("Could not tell whether queue {} exists: {}", queue, ex.getMessage());
            return false;
        }
    }
}
