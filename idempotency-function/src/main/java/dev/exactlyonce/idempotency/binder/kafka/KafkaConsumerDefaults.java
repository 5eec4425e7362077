package dev.exactlyonce.idempotency.binder.kafka;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.BinderConsumerDefaults;
import dev.exactlyonce.idempotency.guard.ConsumerSettings;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.stream.binder.kafka.properties.KafkaConsumerProperties;
import org.springframework.core.env.Environment;

/**
 * What the library sets and checks on a guarded Kafka binding: a dead-letter topic and its serializers, an error
 * handler that never skips a record given back, a hold within {@code max.poll.interval.ms}. See docs/reference.md,
 * "Swapping binders".
 */
final class KafkaConsumerDefaults implements BinderConsumerDefaults<KafkaConsumerProperties> {

    /** By name: loaded only where the Kafka binder is. */
    public static final String PROPERTIES =
            "org.springframework.cloud.stream.binder.kafka.properties.KafkaConsumerProperties";

    // The error handlers' bean names: a service replaces one with a bean of the same name.
    public static final String ERROR_HANDLER = "idempotencyKafkaErrorHandler";

    public static final String BATCH_ERROR_HANDLER = "idempotencyKafkaBatchErrorHandler";

    public static final String BATCH_ERROR_HANDLER_WITHOUT_DLQ = "idempotencyKafkaBatchErrorHandlerWithoutDlq";

    public static final String ERROR_HANDLER_WITHOUT_DLQ = "idempotencyKafkaErrorHandlerWithoutDlq";

    public static final String TRANSACTIONAL_ERROR_HANDLER = "idempotencyKafkaTransactionalErrorHandler";

    private static final String BINDER = "spring.cloud.stream.kafka.binder";

    private static final String MAX_POLL_INTERVAL = "max.poll.interval.ms";

    /** The Kafka consumer's own default of {@value #MAX_POLL_INTERVAL}. */
    private static final long DEFAULT_MAX_POLL_INTERVAL_MS = 300_000;

    /** Room for the other records of a poll, beside one held through an outage. */
    private static final Duration POLL_ROOM = Duration.ofMinutes(1);

    private static final String DEAD_LETTER_SERIALIZER = DeadLetterSerializer.class.getName();

    /** The consumer's deserializers whose keys and values {@code DeadLetterSerializer} writes back as they came. */
    private static final List<String> WRITTEN_BACK = List.of(
            "org.apache.kafka.common.serialization.ByteArrayDeserializer",
            "org.apache.kafka.common.serialization.StringDeserializer",
            "org.apache.kafka.common.serialization.BytesDeserializer",
            "org.apache.kafka.common.serialization.ByteBufferDeserializer");

    private final Binder configuration;

    private final Environment environment;

    private final IdempotencyProperties.Outage outage;

    private final Duration connectionWait;

    private final KafkaDeadLetterSends deadLetterSends;

    public KafkaConsumerDefaults(
            Binder configuration,
            Environment environment,
            IdempotencyProperties.Outage outage,
            Duration connectionWait,
            KafkaDeadLetterSends deadLetterSends) {
        this.configuration = configuration;
        this.environment = environment;
        this.outage = outage;
        this.connectionWait = connectionWait;
        this.deadLetterSends = deadLetterSends;
    }

    @Override
    public Class<KafkaConsumerProperties> propertiesType() {
        return KafkaConsumerProperties.class;
    }

    @Override
    public void apply(KafkaConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        binding.requireDeadLetters(
                "enable-dlq",
                consumer.isEnableDlq(),
                true,
                "has no group: the binder consumes it as an anonymous consumer group, which starts at the latest"
                        + " offset (events published while the service is down are never read) and gets no"
                        + " dead-letter topic",
                () -> consumer.setEnableDlq(true));
        setErrorHandler(consumer, binding, transactional(consumer));
        if (consumer.isEnableDlq()) {
            binding.interceptErrors(this.deadLetterSends.check(binding.name()));
        }
        setDeadLetterSerializers(consumer, binding);
        fitHoldInPollInterval(consumer, binding);
    }

    /** Sets the error handler unless the binding names its own: the binder's would skip a record given back. */
    private static void setErrorHandler(
            KafkaConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding, boolean transactional) {
        if (consumer.getCommonErrorHandlerBeanName() != null) {
            return;
        }
        if (transactional && !binding.batch()) {
            consumer.setCommonErrorHandlerBeanName(TRANSACTIONAL_ERROR_HANDLER);
            return;
        }
        boolean deadLetters = consumer.isEnableDlq();
        consumer.setCommonErrorHandlerBeanName(
                deadLetters
                        ? (binding.batch() ? BATCH_ERROR_HANDLER : ERROR_HANDLER)
                        : (binding.batch() ? BATCH_ERROR_HANDLER_WITHOUT_DLQ : ERROR_HANDLER_WITHOUT_DLQ));
    }

    /**
     * Gives the dead-letter producer {@code DeadLetterSerializer}s unless the service set some: records are read
     * natively, and without them a keyed record is skipped, not dead-lettered. Refuses to start where they could not
     * write back what the consumer reads, or where the binder's transactional producer, which writes the dead letters,
     * has no serializers set.
     */
    private void setDeadLetterSerializers(KafkaConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        if (!consumer.isEnableDlq()) {
            return;
        }
        Map<String, String> producer = consumer.getDlqProducerProperties().getConfiguration();
        Map<String, String> reader = consumer.getConfiguration();
        boolean transactional = binderTransactions();
        for (String part : List.of("key", "value")) {
            String serializer = part + ".serializer";
            if (transactional) {
                if (setting(serializer, BINDER + ".transaction.producer.configuration") == null) {
                    throw new StartupRefusal(
                            ("Binding %s dead-letters through the Kafka binder's transactional producer, which has no"
                                            + " %s: a rejected record would fail to be dead-lettered, and be lost")
                                    .formatted(binding.name(), serializer),
                            ("Set %s.transaction.producer.configuration.%s (%s writes back the bytes or strings the"
                                            + " consumer read)")
                                    .formatted(BINDER, serializer, DEAD_LETTER_SERIALIZER));
                }
                continue;
            }
            if (producer.containsKey(serializer)
                    || setting(serializer, BINDER + ".configuration", BINDER + ".producer-properties") != null) {
                continue;
            }
            String deserializer = reader.containsKey(part + ".deserializer")
                    ? reader.get(part + ".deserializer")
                    : setting(
                            part + ".deserializer",
                            BINDER + ".configuration",
                            BINDER + ".consumer-properties",
                            "spring.kafka.properties",
                            "spring.kafka.consumer.properties");
            if (deserializer == null) {
                deserializer = this.environment.getProperty("spring.kafka.consumer." + part + "-deserializer");
            }
            if (deserializer != null && !WRITTEN_BACK.contains(deserializer)) {
                throw new StartupRefusal(
                        ("Binding %s reads record %ss with %s, and its dead-letter producer has no %s to write them"
                                        + " back: a rejected record would fail to be dead-lettered, and be lost")
                                .formatted(binding.name(), part, deserializer, serializer),
                        ("Set %s.consumer.dlq-producer-properties.configuration.%s to the serializer that matches %s")
                                .formatted(binding.prefix(), serializer, deserializer));
            }
            producer.put(serializer, DEAD_LETTER_SERIALIZER);
        }
    }

    private boolean transactional(KafkaConsumerProperties consumer) {
        return consumer.getTransactionManager() != null || binderTransactions();
    }

    /** Whether the binder has a transaction manager of its own, whose producer writes the dead letters. */
    private boolean binderTransactions() {
        return this.configuration
                .bind(BINDER + ".transaction.transaction-id-prefix", String.class)
                .isBound();
    }

    /** Refuses a hold (its last trial included) over {@code max.poll.interval.ms}; where unset, raises it to fit. */
    private void fitHoldInPollInterval(KafkaConsumerProperties consumer, ConsumerSettings.ConsumerBinding binding) {
        Duration held = this.outage.maxHold().plus(this.connectionWait).plus(this.outage.socketTimeout());
        Duration pollInterval;
        try {
            pollInterval = maxPollInterval(consumer);
        } catch (RuntimeException ex) {
            // Not a number: the Kafka client says what is wrong with it when the binding starts.
            return;
        }
        if (pollInterval == null) {
            Duration fitting = held.plus(POLL_ROOM);
            if (fitting.toMillis() > DEFAULT_MAX_POLL_INTERVAL_MS) {
                consumer.getConfiguration().put(MAX_POLL_INTERVAL, String.valueOf(fitting.toMillis()));
            }
            return;
        }
        if (held.compareTo(pollInterval) >= 0) {
            throw new StartupRefusal(
                    ("Binding %s may hold a record %s during an outage (idempotency.outage.max-hold %s, plus the"
                                    + " pool's connection-timeout %s and idempotency.outage.socket-timeout %s for the"
                                    + " trial taken at its end), longer than its consumer's %s (%s): the consumer"
                                    + " would leave its group, and its partitions move, each time a record is held"
                                    + " that long")
                            .formatted(
                                    binding.name(),
                                    held,
                                    this.outage.maxHold(),
                                    this.connectionWait,
                                    this.outage.socketTimeout(),
                                    MAX_POLL_INTERVAL,
                                    pollInterval),
                    ("Lower idempotency.outage.max-hold, or raise %s.consumer.configuration.%s above %s with room"
                                    + " for the other records of a poll (unset, the library sets it to %s)")
                            .formatted(binding.prefix(), MAX_POLL_INTERVAL, held, held.plus(POLL_ROOM)));
        }
    }

    /** The consumer's {@value #MAX_POLL_INTERVAL}, from the first place the binder reads it; {@code null} if unset. */
    private @Nullable Duration maxPollInterval(KafkaConsumerProperties consumer) {
        String set = consumer.getConfiguration().get(MAX_POLL_INTERVAL);
        if (set == null) {
            set = setting(
                    MAX_POLL_INTERVAL,
                    BINDER + ".consumer-properties",
                    BINDER + ".configuration",
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
        set = setting(MAX_POLL_INTERVAL, "spring.kafka.properties");
        return set != null ? Duration.ofMillis(Long.parseLong(set.trim())) : null;
    }

    /** A Kafka client setting from the first of these maps of settings that has it (dotted or bracketed keys). */
    private @Nullable String setting(String name, String... maps) {
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
}
