package dev.exactlyonce.idempotency;

import com.rabbitmq.client.Channel;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.AmqpException;
import org.springframework.amqp.rabbit.connection.Connection;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.beans.BeanWrapper;
import org.springframework.beans.BeanWrapperImpl;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.core.Conventions;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;
import org.springframework.util.StringUtils;

/**
 * Sets the binder's own consumer properties of a guarded binding, before it is bound, unless the service set them
 * either way, for the binding or as the binder's default, and checks what the binding relies on:
 *
 * <ul>
 *   <li>a dead-letter queue. The guard rejects malformed messages without retry; without a dead-letter queue the
 *       broker would drop them (RabbitMQ discards a rejected message that has nowhere to go, and nothing says it was
 *       lost). RabbitMQ: {@code auto-bind-dlq} (the queue {@code <queue>.dlq}; the binder's {@code republish-to-dlq},
 *       on by default, records the reason in the dead letter's headers); Kafka: {@code enable-dlq} (the topic
 *       {@code error.<destination>.<group>}). Where the library cannot give it one, start-up fails saying what to
 *       set, unless the service switched the dead-letter queue off itself: a binding without a group (the binders
 *       give an anonymous queue or consumer group no dead-letter queue, and the queue goes with the service), a
 *       RabbitMQ queue that is not durable ({@code durable-subscription: false}: no dead-letter queue either), and a
 *       RabbitMQ queue declared earlier without a dead-letter queue (by a service that ran without this default: the
 *       broker refuses (406) to declare an existing queue again with a dead-letter exchange);
 *   <li>on Kafka, the dead-letter producer's serializers: the library's {@code DeadLetterSerializer} (bytes as they
 *       are, strings as UTF-8), so that a rejected record, key included, is written to the dead-letter topic as it
 *       came (without serializers, a record with a key fails to be dead-lettered and is skipped), unless the service
 *       set them; a consumer that deserializes keys or values to anything else, without serializers set for its dead
 *       letters, is refused at start-up;
 *   <li>on Kafka, the container's error handler: a record given back during an outage is sought back to every second,
 *       without limit, where the container's error handler would skip it (after ten failures with a dead-letter
 *       topic, at once without), losing it. Any other failure that reaches the container is handled as the binder's
 *       own handler does: {@value #KAFKA_ERROR_HANDLER} with a dead-letter topic, {@value
 *       #KAFKA_ERROR_HANDLER_WITHOUT_DLQ} without. A batch binding with a dead-letter topic gets
 *       {@value #KAFKA_BATCH_ERROR_HANDLER}, which delivers the batch again every second, without limit: its failed
 *       records go to the dead-letter topic through the binding's error channel, so what reaches the container is a
 *       batch given back during an outage (or a dead letter that could not be published), never one to skip; without
 *       a dead-letter topic, {@value #KAFKA_BATCH_ERROR_HANDLER_WITHOUT_DLQ} does the same for a batch given back and
 *       skips any other failure;
 *   <li>on RabbitMQ, a binding that declares no exchange ({@code declare-exchange: false}, {@code declare-dlx: false}:
 *       the service's broker user may not configure them, the broker's definitions declare them) finds them there at
 *       start-up, or start-up fails saying which is missing: a queue bound to an exchange that does not exist would
 *       receive nothing, and dead letters sent to a missing {@code DLX} would be lost;
 *   <li>on RabbitMQ, a batch binding ({@code batch-mode}) gets its batches gathered by the listener container, and
 *       a bound on how long a batch waits (see {@code setBatchDefaults});
 *   <li>on RabbitMQ, the queue is bound with the names of the events the functions map (see
 *       {@code setRoutingKeys}).
 * </ul>
 */
final class BinderConsumers {

    /** The bean name of the error handler of guarded Kafka bindings. */
    static final String KAFKA_ERROR_HANDLER = "idempotencyKafkaErrorHandler";

    /** The bean name of the error handler of guarded Kafka batch bindings with a dead-letter topic. */
    static final String KAFKA_BATCH_ERROR_HANDLER = "idempotencyKafkaBatchErrorHandler";

    /** The bean name of the error handler of guarded Kafka batch bindings without a dead-letter topic. */
    static final String KAFKA_BATCH_ERROR_HANDLER_WITHOUT_DLQ = "idempotencyKafkaBatchErrorHandlerWithoutDlq";

    /** The bean name of the error handler of guarded Kafka bindings without a dead-letter topic. */
    static final String KAFKA_ERROR_HANDLER_WITHOUT_DLQ = "idempotencyKafkaErrorHandlerWithoutDlq";

    /** The batch size of a guarded RabbitMQ batch binding that sets none. */
    static final int BATCH_SIZE = 100;

    /** The listener container's own receive timeout, when the binding sets none. */
    private static final long CONTAINER_RECEIVE_TIMEOUT_MS = 1_000;

    /** How long a guarded RabbitMQ batch binding that sets no {@code receive-timeout} waits for a batch's next message. */
    static final long RECEIVE_TIMEOUT_MS = 1;

    private static final Logger logger = LoggerFactory.getLogger(BinderConsumers.class);

    private static final String KAFKA_BINDER = "spring.cloud.stream.kafka.binder";

    private static final String MAX_POLL_INTERVAL = "max.poll.interval.ms";

    /** The Kafka consumer's own default of {@value #MAX_POLL_INTERVAL}. */
    private static final long DEFAULT_MAX_POLL_INTERVAL_MS = 300_000;

    /** By name: Kafka's client is on the class path only with the Kafka binder. */
    private static final String DEAD_LETTER_SERIALIZER = "dev.exactlyonce.idempotency.kafka.DeadLetterSerializer";

    /** The consumer's deserializers whose keys and values {@code DeadLetterSerializer} writes back as they came. */
    private static final List<String> WRITTEN_BACK = List.of(
            "org.apache.kafka.common.serialization.ByteArrayDeserializer",
            "org.apache.kafka.common.serialization.StringDeserializer",
            "org.apache.kafka.common.serialization.BytesDeserializer",
            "org.apache.kafka.common.serialization.ByteBufferDeserializer");

    /** The binders' switches: the property of their consumer properties, and its name in configuration. */
    private static final Map<String, String> SWITCHES =
            Map.of("autoBindDlq", "auto-bind-dlq", "enableDlq", "enable-dlq");

    private final Environment environment;

    private final Binder configuration;

    private final BindingServiceProperties bindings;

    private final ListableBeanFactory beanFactory;

    private final Duration maxWait;

    private final IdempotencyProperties.Outage outage;

    private final boolean routeCheck;

    BinderConsumers(
            Environment environment,
            BindingServiceProperties bindings,
            ListableBeanFactory beanFactory,
            IdempotencyProperties properties) {
        this.environment = environment;
        this.maxWait = properties.batch().maxWait();
        this.outage = properties.outage();
        this.routeCheck = properties.eventId().routeCheck();
        this.configuration = Binder.get(environment);
        this.bindings = bindings;
        this.beanFactory = beanFactory;
    }

    /**
     * @param eventNames the names of the events the binding's functions map; empty when they take events of any
     *     name
     */
    void apply(Object binder, String bindingName, Set<String> eventNames) {
        if (!(binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended)) {
            return;
        }
        BeanWrapper consumerProperties = new BeanWrapperImpl(extended.getExtendedConsumerProperties(bindingName));
        boolean grouped = StringUtils.hasText(
                this.bindings.getBindingProperties(bindingName).getGroup());
        if (grouped && !Boolean.FALSE.equals(readable(consumerProperties, "durableSubscription"))) {
            setDeadLetterDefaults(extended, consumerProperties, bindingName);
        } else {
            refuseWithoutDeadLetterQueue(extended, consumerProperties, bindingName, grouped);
        }
        setKafkaErrorHandler(consumerProperties, bindingName);
        setDeadLetterSerializers(consumerProperties, bindingName);
        refuseHoldLongerThanPollInterval(consumerProperties, bindingName);
        if (this.bindings.getConsumerProperties(bindingName).isBatchMode()) {
            setBatchDefaults(extended, consumerProperties, bindingName);
        }
        checkExchanges(consumerProperties, bindingName);
        setRoutingKeys(extended, consumerProperties, bindingName, eventNames);
    }

    /**
     * RabbitMQ: the queue is bound with the names of the events the functions map, unless the service set
     * {@code binding-routing-key} itself. The binder's own default, {@code #}, would route every event of the exchange
     * to the queue, and the guard would dead-letter each one no function maps as {@code UNKNOWN_EVENT}. Only where
     * routing keys are event names: the route check on, a topic or direct exchange, a binding neither partitioned nor a
     * super stream. A queue declared earlier keeps the bindings it had: RabbitMQ adds bindings, it never removes them.
     */
    private void setRoutingKeys(
            ExtendedPropertiesBinder<?, ?, ?> extended,
            BeanWrapper consumer,
            String bindingName,
            Set<String> eventNames) {
        if (eventNames.isEmpty()
                || !this.routeCheck
                || !consumer.isWritableProperty("bindingRoutingKey")
                || consumer.getPropertyValue("bindingRoutingKey") != null
                || isSet(extended, bindingName, "binding-routing-key")
                || this.bindings.getConsumerProperties(bindingName).isPartitioned()
                || Boolean.TRUE.equals(readable(consumer, "superStream"))
                || !List.of("topic", "direct").contains(String.valueOf(readable(consumer, "exchangeType")))) {
            // Routing keys that are not event names (route-check off, a partitioned binding's keys, a super stream's
            // partitions), or an exchange that routes by no key.
            return;
        }
        Object delimiter = consumer.getPropertyValue("bindingRoutingKeyDelimiter");
        if (delimiter == null) {
            delimiter = ",";
            consumer.setPropertyValue("bindingRoutingKeyDelimiter", delimiter);
        }
        String keys = String.join(delimiter.toString(), new TreeSet<>(eventNames));
        consumer.setPropertyValue("bindingRoutingKey", keys);
        logger.info(
                "Binding {} binds its queue with the events its functions map ({}); set {}.{}.consumer"
                        + ".binding-routing-key to bind it otherwise",
                bindingName,
                keys,
                bindingsPrefix(extended),
                bindingName);
    }

    /**
     * RabbitMQ batches: the listener container gathers them ({@code enable-batching}; without it the binder delivers
     * batches of one), up to {@value #BATCH_SIZE} messages unless {@code batch-size} is set, with twice that many in
     * flight unless {@code prefetch} is set (the next batch arrives while one commits). A batch takes the messages
     * that are there: it is handed on as soon as no next message comes within {@value #RECEIVE_TIMEOUT_MS} ms unless
     * {@code receive-timeout} is set (the container's own default, one second, would hold a lone event that long),
     * and at the latest {@code idempotency.batch.max-wait} after it began ({@link RabbitContainers}). So a batch
     * is as large as the load makes it: one event at a low rate, full under a backlog. The container checks a batch's
     * age between two messages only, so a {@code receive-timeout} longer than {@code max-wait} is lowered to it: a batch
     * waits at most {@code max-wait} plus {@code receive-timeout}. Its messages go to the
     * dead-letter queue one by one only if the binder republishes them ({@code republish-to-dlq}, its default):
     * otherwise it rejects a batch whole.
     */
    private void setBatchDefaults(
            ExtendedPropertiesBinder<?, ?, ?> extended, BeanWrapper consumer, String bindingName) {
        if (!consumer.isWritableProperty("enableBatching")) {
            return;
        }
        Map<String, Object> batchDefaults = new LinkedHashMap<>();
        batchDefaults.put("enable-batching", true);
        batchDefaults.put("batch-size", BATCH_SIZE);
        if (!this.maxWait.isZero()) {
            batchDefaults.put("receive-timeout", RECEIVE_TIMEOUT_MS);
        }
        batchDefaults.forEach((name, value) -> setUnlessSet(extended, consumer, bindingName, name, value));
        // Set after batch-size, which it follows.
        setUnlessSet(extended, consumer, bindingName, "prefetch", 2 * (int) consumer.getPropertyValue("batchSize"));
        // The container checks a batch's age between two messages only, and waits up to receive-timeout for the next
        // one: a longer receive-timeout would hold a batch that long, whatever max-wait says.
        long receiveTimeout = consumer.getPropertyValue("receiveTimeout") instanceof Number set
                ? set.longValue()
                : CONTAINER_RECEIVE_TIMEOUT_MS;
        if (!this.maxWait.isZero() && receiveTimeout > this.maxWait.toMillis()) {
            consumer.setPropertyValue("receiveTimeout", Math.max(1, this.maxWait.toMillis()));
            logger.info(
                    "Binding {} waits at most idempotency.batch.max-wait ({}) for a batch's next message, not its"
                            + " receive-timeout ({} ms): the listener container checks a batch's age only between two"
                            + " messages",
                    bindingName,
                    this.maxWait,
                    receiveTimeout);
        }
        if (Boolean.FALSE.equals(consumer.getPropertyValue("republishToDlq"))) {
            logger.warn(
                    "Binding {} delivers batches without republish-to-dlq: RabbitMQ then rejects a failed batch whole,"
                            + " to its dead-letter queue with the events the batch processed. Leave republish-to-dlq"
                            + " on, so that only the messages that fail go there",
                    bindingName);
        }
    }

    /**
     * Refuses a binding the binder gives no dead-letter queue, unless the service switched it off itself: a binding
     * without a group (an anonymous RabbitMQ queue, deleted with the service; an anonymous Kafka consumer group, which
     * starts at the latest offset) or, on RabbitMQ, with a queue that is not durable ({@code durable-subscription:
     * false}). The broker would drop the messages the guard rejects.
     */
    private void refuseWithoutDeadLetterQueue(
            ExtendedPropertiesBinder<?, ?, ?> extended, BeanWrapper consumer, String bindingName, boolean grouped) {
        SWITCHES.forEach((property, name) -> {
            if (!consumer.isWritableProperty(property)
                    || switchedOff(extended, consumer, bindingName, property, name)) {
                return;
            }
            boolean kafka = property.equals("enableDlq");
            String why = grouped
                    ? "its queue is not durable (durable-subscription: false): the binder gives such a queue no"
                            + " dead-letter queue, and deletes it, with the events still in it, when the service stops"
                    : kafka
                            ? "has no group: the binder consumes it as an anonymous consumer group, which starts at"
                                    + " the latest offset (events published while the service is down are never"
                                    + " read) and gets no dead-letter topic"
                            : "has no group: the binder consumes it through an anonymous queue, deleted, with the"
                                    + " events still in it, when the service stops, and gives it no dead-letter queue";
            throw new StartupRefusal(
                    "Binding %s %s. The messages the guard rejects would have nowhere to go: the broker would drop them"
                            .formatted(bindingName, grouped ? "has no dead-letter queue: " + why : why),
                    (grouped
                                    ? "Remove %s.%s.consumer.durable-subscription=false"
                                            .formatted(bindingsPrefix(extended), bindingName)
                                    : "Set spring.cloud.stream.bindings.%s.group=<the service's name> (its queue or"
                                                    .formatted(bindingName)
                                            + " consumer group is then durable, shared by the service's instances,"
                                            + " and the library gives it a dead-letter queue)")
                            + "; or, to consume without one, set %s.%s.consumer.%s=false"
                                    .formatted(bindingsPrefix(extended), bindingName, name));
        });
    }

    private static @Nullable Object readable(BeanWrapper consumer, String property) {
        return consumer.isReadableProperty(property) ? consumer.getPropertyValue(property) : null;
    }

    /** Whether the service set the binder's dead-letter switch to false itself. */
    private boolean switchedOff(
            ExtendedPropertiesBinder<?, ?, ?> extended,
            BeanWrapper consumer,
            String bindingName,
            String property,
            String name) {
        return isSet(extended, bindingName, name) && Boolean.FALSE.equals(consumer.getPropertyValue(property));
    }

    private void setDeadLetterDefaults(
            ExtendedPropertiesBinder<?, ?, ?> extended, BeanWrapper consumer, String bindingName) {
        SWITCHES.forEach((property, name) -> {
            if (consumer.isWritableProperty(property) && !isSet(extended, bindingName, name)) {
                refuseQueueWithoutDeadLetters(extended, consumer, bindingName, name);
                consumer.setPropertyValue(property, true);
                logger.info(
                        "Binding {} gets a dead-letter queue ({}.{}.consumer.{}=true), where the messages the guard"
                                + " rejects go; set the property to false to do without",
                        bindingName,
                        bindingsPrefix(extended),
                        bindingName,
                        name);
            }
        });
    }

    /**
     * Kafka: the dead-letter producer writes a rejected record as it came. The guard reads records natively
     * ({@code use-native-decoding}), so the binder hands that producer the record's key and value as the consumer's
     * deserializers made them, and needs serializers for them: without, a record with a key fails to be
     * dead-lettered, and once the error handler gives up it is skipped, lost. {@code DeadLetterSerializer} writes
     * bytes (the binder's default) and strings back as they came, unless the service set serializers, for the
     * binding's dead letters or for the binder's producers; a consumer that deserializes to anything else is refused at
     * start-up, since only the service knows how to write its keys and values back. So is a transactional binder
     * without serializers for its transactional producer, which writes the dead letters then.
     */
    private void setDeadLetterSerializers(BeanWrapper consumer, String bindingName) {
        if (!consumer.isReadableProperty("dlqProducerProperties")
                || !Boolean.TRUE.equals(consumer.getPropertyValue("enableDlq"))) {
            return;
        }
        Map<String, String> producer = configurationOf(consumer.getPropertyValue("dlqProducerProperties"));
        Map<String, String> reader = configurationOf(consumer.getWrappedInstance());
        boolean transactional = this.configuration
                .bind(KAFKA_BINDER + ".transaction.transaction-id-prefix", String.class)
                .isBound();
        for (String part : List.of("key", "value")) {
            String serializer = part + ".serializer";
            if (transactional) {
                if (kafkaSetting(serializer, KAFKA_BINDER + ".transaction.producer.configuration") == null) {
                    throw new StartupRefusal(
                            ("Binding %s dead-letters through the Kafka binder's transactional producer, which has no"
                                            + " %s: a rejected record would fail to be dead-lettered, and be lost")
                                    .formatted(bindingName, serializer),
                            ("Set %s.transaction.producer.configuration.%s (%s writes back the bytes or strings the"
                                            + " consumer read)")
                                    .formatted(KAFKA_BINDER, serializer, DEAD_LETTER_SERIALIZER));
                }
                continue;
            }
            if (producer.containsKey(serializer)
                    || kafkaSetting(serializer, KAFKA_BINDER + ".configuration", KAFKA_BINDER + ".producer-properties")
                            != null) {
                continue;
            }
            String deserializer = reader.containsKey(part + ".deserializer")
                    ? reader.get(part + ".deserializer")
                    : kafkaSetting(
                            part + ".deserializer",
                            KAFKA_BINDER + ".configuration",
                            KAFKA_BINDER + ".consumer-properties",
                            "spring.kafka.properties",
                            "spring.kafka.consumer.properties");
            if (deserializer == null) {
                deserializer = this.environment.getProperty("spring.kafka.consumer." + part + "-deserializer");
            }
            if (deserializer != null && !WRITTEN_BACK.contains(deserializer)) {
                throw new StartupRefusal(
                        ("Binding %s reads record %ss with %s, and its dead-letter producer has no %s to write them"
                                        + " back: a rejected record would fail to be dead-lettered, and be lost")
                                .formatted(bindingName, part, deserializer, serializer),
                        ("Set spring.cloud.stream.kafka.bindings.%s.consumer.dlq-producer-properties.configuration.%s"
                                        + " to the serializer that matches %s")
                                .formatted(bindingName, serializer, deserializer));
            }
            producer.put(serializer, DEAD_LETTER_SERIALIZER);
        }
    }

    /**
     * Kafka: a consumer that does not poll within {@code max.poll.interval.ms} leaves its group, and its partitions
     * go to the others (or wait, with one consumer), a rebalance each time a delivery is held that long during an
     * outage. A delivery is held at most {@code max-hold} in all (a batch binding's: a single-message binding is paused
     * instead, see {@code PausedBindings}, but may be bound by a binder that cannot pause it), and the statement that
     * meets the outage waits at most {@code socket-timeout}: both must fit in the interval, with the records of the
     * same poll processed before it.
     */
    private void refuseHoldLongerThanPollInterval(BeanWrapper consumer, String bindingName) {
        if (!consumer.isReadableProperty("enableDlq") || !consumer.isReadableProperty("configuration")) {
            return;
        }
        Duration pollInterval;
        try {
            pollInterval = maxPollInterval(consumer);
        } catch (RuntimeException ex) {
            // Not a number: the Kafka client says what is wrong with it when the binding starts.
            return;
        }
        Duration held = this.outage.maxHold().plus(this.outage.socketTimeout());
        if (held.compareTo(pollInterval) >= 0) {
            throw new StartupRefusal(
                    ("Binding %s may hold a record %s during an outage (idempotency.outage.max-hold %s, plus"
                                    + " idempotency.outage.socket-timeout %s for the statement that meets it), longer"
                                    + " than its consumer's %s (%s): the consumer would leave its group, and its"
                                    + " partitions move, each time a record is held that long")
                            .formatted(
                                    bindingName,
                                    held,
                                    this.outage.maxHold(),
                                    this.outage.socketTimeout(),
                                    MAX_POLL_INTERVAL,
                                    pollInterval),
                    ("Lower idempotency.outage.max-hold (the default, 4m, fits the default %s of 5 minutes), or raise"
                                    + " spring.cloud.stream.kafka.bindings.%s.consumer.configuration.%s above %s with"
                                    + " room for the other records of a poll")
                            .formatted(MAX_POLL_INTERVAL, bindingName, MAX_POLL_INTERVAL, held));
        }
    }

    /**
     * The consumer's {@value #MAX_POLL_INTERVAL}, where the Kafka binder takes it from, the first that sets it: the
     * binding's {@code configuration}, the binder's {@code consumer-properties}, then {@code configuration}, Spring
     * Boot's {@code spring.kafka.consumer.properties}, {@code spring.kafka.consumer.max-poll-interval}, then
     * {@code spring.kafka.properties}; else the client's default.
     */
    private Duration maxPollInterval(BeanWrapper consumer) {
        String set = configurationOf(consumer.getWrappedInstance()).get(MAX_POLL_INTERVAL);
        if (set == null) {
            set = kafkaSetting(
                    MAX_POLL_INTERVAL,
                    KAFKA_BINDER + ".consumer-properties",
                    KAFKA_BINDER + ".configuration",
                    "spring.kafka.consumer.properties");
        }
        if (set != null) {
            return Duration.ofMillis(Long.parseLong(set.trim()));
        }
        Duration typed = this.configuration
                .bind("spring.kafka.consumer.max-poll-interval", Duration.class)
                .orElse(null);
        if (typed != null) {
            return typed;
        }
        set = kafkaSetting(MAX_POLL_INTERVAL, "spring.kafka.properties");
        return Duration.ofMillis(set != null ? Long.parseLong(set.trim()) : DEFAULT_MAX_POLL_INTERVAL_MS);
    }

    /** A Kafka client setting from the first of these maps of settings that has it (dotted or bracketed keys). */
    private @Nullable String kafkaSetting(String name, String... maps) {
        for (String map : maps) {
            String value = this.configuration
                    .bind(map, Bindable.mapOf(String.class, String.class))
                    .map(settings -> settings.get(name))
                    .orElse(null);
            if (value != null) {
                return value;
            }
        }
        return null;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, String> configurationOf(@Nullable Object properties) {
        Object configuration =
                properties != null ? new BeanWrapperImpl(properties).getPropertyValue("configuration") : null;
        return configuration instanceof Map<?, ?> map ? (Map<String, String>) map : new LinkedHashMap<>();
    }

    /** A guarded Kafka binding's error handler (see the class's description), unless the binding names its own. */
    private void setKafkaErrorHandler(BeanWrapper consumer, String bindingName) {
        if (consumer.isWritableProperty("enableDlq")
                && consumer.isWritableProperty("commonErrorHandlerBeanName")
                && consumer.getPropertyValue("commonErrorHandlerBeanName") == null) {
            boolean deadLetters = Boolean.TRUE.equals(consumer.getPropertyValue("enableDlq"));
            boolean batch = this.bindings.getConsumerProperties(bindingName).isBatchMode();
            consumer.setPropertyValue(
                    "commonErrorHandlerBeanName",
                    deadLetters
                            ? (batch ? KAFKA_BATCH_ERROR_HANDLER : KAFKA_ERROR_HANDLER)
                            : (batch ? KAFKA_BATCH_ERROR_HANDLER_WITHOUT_DLQ : KAFKA_ERROR_HANDLER_WITHOUT_DLQ));
        }
    }

    /**
     * Refuses a binding whose RabbitMQ queue exists already without its dead-letter queue (declared by a service that
     * ran without one): the broker refuses to declare an existing queue again with a dead-letter exchange, so the
     * library cannot give it one, and the broker would drop the messages the guard rejects. Unknown (no RabbitMQ, the
     * broker unreachable, a partitioned binding) counts as no.
     */
    private void refuseQueueWithoutDeadLetters(
            ExtendedPropertiesBinder<?, ?, ?> extended, BeanWrapper consumer, String bindingName, String name) {
        if (!consumer.isReadableProperty("queueNameGroupOnly")
                || !ClassUtils.isPresent("org.springframework.amqp.rabbit.core.RabbitAdmin", null)
                || this.bindings.getConsumerProperties(bindingName).isPartitioned()) {
            return;
        }
        String prefix = String.valueOf(consumer.getPropertyValue("prefix"));
        String group = this.bindings.getBindingProperties(bindingName).getGroup();
        boolean groupOnly = Boolean.TRUE.equals(consumer.getPropertyValue("queueNameGroupOnly"));
        Object deadLetterQueue = consumer.getPropertyValue("deadLetterQueueName");
        for (String destination :
                this.bindings.getBindingDestination(bindingName).split(",")) {
            String queue = prefix + (groupOnly ? group : destination.trim() + "." + group);
            String dlq = deadLetterQueue != null ? deadLetterQueue.toString() : queue + ".dlq";
            if (RabbitQueues.existsWithout(this.beanFactory, queue, dlq)) {
                throw new StartupRefusal(
                        ("Binding %s has no dead-letter queue: its queue %s exists without %s. If the queue was"
                                        + " declared without a dead-letter exchange (by a version that ran without"
                                        + " one), RabbitMQ refuses to declare it again with one, and the broker would"
                                        + " drop the messages the guard rejects")
                                .formatted(bindingName, queue, dlq),
                        ("Drain the queue and delete it, so that the binder declares it again with its dead-letter"
                                        + " queue; if only %s was deleted, set %s.%s.consumer.%s=true to have the"
                                        + " binder declare it again; or, to consume without one, set it to false")
                                .formatted(dlq, bindingsPrefix(extended), bindingName, name));
            }
        }
    }

    private void setUnlessSet(
            ExtendedPropertiesBinder<?, ?, ?> extended,
            BeanWrapper consumer,
            String bindingName,
            String name,
            Object value) {
        if (!isSet(extended, bindingName, name)) {
            consumer.setPropertyValue(Conventions.attributeNameToPropertyName(name), value);
        }
    }

    /**
     * Whether the service set the binder's consumer property, for the binding or as the binder's default (for
     * example {@code spring.cloud.stream.rabbit.bindings.<binding>.consumer.<name>} or
     * {@code spring.cloud.stream.rabbit.default.consumer.<name>}).
     */
    private boolean isSet(ExtendedPropertiesBinder<?, ?, ?> extended, String bindingName, String name) {
        String bindings = bindingsPrefix(extended);
        return isSet(bindings + "." + bindingName, bindings + "[" + bindingName + "]", name)
                || isSet(extended.getDefaultsPrefix(), extended.getDefaultsPrefix(), name);
    }

    /** spring.cloud.stream.rabbit.bindings, beside the binder's defaults (spring.cloud.stream.rabbit.default). */
    private static String bindingsPrefix(ExtendedPropertiesBinder<?, ?, ?> extended) {
        String defaults = extended.getDefaultsPrefix();
        return defaults.substring(0, defaults.lastIndexOf('.')) + ".bindings";
    }

    /**
     * Fails start-up when a RabbitMQ binding that declares no exchange does not find it: its destination exchange(s)
     * ({@code declare-exchange: false}), or its dead-letter exchange ({@code declare-dlx: false}).
     */
    private void checkExchanges(BeanWrapper consumer, String bindingName) {
        if (!consumer.isReadableProperty("declareExchange")
                || !ClassUtils.isPresent("org.springframework.amqp.rabbit.core.RabbitAdmin", null)) {
            return;
        }
        String prefix = String.valueOf(consumer.getPropertyValue("prefix"));
        List<String> expected = new ArrayList<>();
        if (Boolean.FALSE.equals(consumer.getPropertyValue("declareExchange"))) {
            for (String destination :
                    this.bindings.getBindingDestination(bindingName).split(",")) {
                expected.add(prefix + destination.trim());
            }
        }
        if (Boolean.TRUE.equals(consumer.getPropertyValue("autoBindDlq"))
                && Boolean.FALSE.equals(consumer.getPropertyValue("declareDlx"))) {
            Object deadLetterExchange = consumer.getPropertyValue("deadLetterExchange");
            expected.add(deadLetterExchange != null ? deadLetterExchange.toString() : prefix + "DLX");
        }
        List<String> missing = RabbitQueues.missingExchanges(this.beanFactory, expected);
        if (!missing.isEmpty()) {
            throw new StartupRefusal(
                    ("Binding %s declares no exchange (declare-exchange: false, declare-dlx: false), and the broker has"
                                    + " none named %s: its queue would receive nothing, or its dead letters would be"
                                    + " lost")
                            .formatted(bindingName, missing),
                    "Declare them in the broker's definitions (infra/rabbitmq/definitions.json shows the shop's), or"
                            + " let the binding declare them with a broker user that may configure them");
        }
    }

    /** Loaded only when Spring AMQP is there. */
    private static final class RabbitQueues {

        /** The exchanges of those names the broker does not have; none when it cannot be asked. */
        static List<String> missingExchanges(ListableBeanFactory beanFactory, List<String> exchanges) {
            ConnectionFactory connectionFactory =
                    beanFactory.getBeanProvider(ConnectionFactory.class).getIfUnique();
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

        static boolean existsWithout(ListableBeanFactory beanFactory, String queue, String deadLetterQueue) {
            ConnectionFactory connectionFactory =
                    beanFactory.getBeanProvider(ConnectionFactory.class).getIfUnique();
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

    /**
     * Whether the property is set: as written in YAML or properties (the binding name with its case), or in a relaxed
     * form (an environment variable) where the binding name can only keep its case between brackets.
     */
    private boolean isSet(String prefix, String relaxedPrefix, String name) {
        return this.environment.containsProperty(prefix + ".consumer." + name)
                || this.configuration
                        .bind(relaxedPrefix + ".consumer." + name, String.class)
                        .isBound();
    }
}
