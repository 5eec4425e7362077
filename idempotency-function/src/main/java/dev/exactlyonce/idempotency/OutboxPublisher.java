package dev.exactlyonce.idempotency;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.support.AmqpHeaders;
import org.springframework.beans.BeanWrapper;
import org.springframework.beans.BeanWrapperImpl;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.StreamBridge;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;
import tools.jackson.databind.util.RawValue;

/**
 * Publishes outbox rows through the binder ({@link StreamBridge}, to the row's destination), in the envelope, and
 * waits until the broker has them:
 *
 * <ul>
 *   <li>RabbitMQ: routing key = the event name, {@code message_id} = the event id, and a publisher confirm per row
 *       (the producer's {@code use-confirm-header}; the connection factory's {@code publisher-confirm-type} must be
 *       {@code correlated}, the library's default);
 *   <li>Kafka: record key = the row's key, so that the events of a key stay in one partition, in order; each send
 *       waits for the broker's acknowledgement (the producer's {@code sync}; mind {@code acks}, {@code all} by
 *       default since Kafka 3.0);
 *   <li>another binder: the send returns once the binder has the message.
 * </ul>
 *
 * <p>The defaults are set on the destination's producer properties before its first publication, unless the service
 * set them (a {@code routing-key-expression} of its own, for one).
 */
final class OutboxPublisher {

    /** A row of the outbox, to publish. */
    record Row(UUID id, String destination, String key, String eventName, String payload, Instant occurredAt) {}

    /**
     * What a publication did.
     *
     * @param confirmed the rows the broker confirmed
     * @param failure why a row was not, if one was not (the first such reason)
     */
    record Published(List<UUID> confirmed, @Nullable String failure) {}

    private enum Confirms {
        RABBIT,
        SYNC,
        NONE
    }

    private static final String RABBIT_ROUTING_KEY = "headers['" + EventHeaders.EVENT_NAME + "']";

    private static final String KAFKA_KEY = "kafka_messageKey";

    /**
     * The most rows in flight at once. Spring AMQP keeps a channel whose confirms are pending out of its cache (25
     * channels by default) until they arrive, so each row in flight holds a channel: past the cache, every send would
     * open and close one.
     */
    static final int MAX_IN_FLIGHT = 20;

    private final StreamBridge streamBridge;

    private final BinderFactory binderFactory;

    private final BindingServiceProperties bindings;

    private final EnvelopeCodec codec;

    private final Duration confirmTimeout;

    private final Map<String, Confirms> destinations = new ConcurrentHashMap<>();

    OutboxPublisher(
            StreamBridge streamBridge,
            BinderFactory binderFactory,
            BindingServiceProperties bindings,
            EnvelopeCodec codec,
            Duration confirmTimeout) {
        this.streamBridge = streamBridge;
        this.binderFactory = binderFactory;
        this.bindings = bindings;
        this.codec = codec;
        this.confirmTimeout = confirmTimeout;
    }

    /**
     * Publishes the rows in their order. They go in waves of distinct keys: a row is sent once the previous row of its
     * key was confirmed. The binder's channels do not keep the order of two messages in flight at once (on RabbitMQ, a
     * channel whose confirms are pending is not reused), so two of one key are never in flight at once. A row the
     * broker does not take holds back the later rows of its key, in this run, and no other: a destination that
     * refuses everything, or one poison row, does not stop the other keys.
     */
    Published publish(List<Row> rows) {
        Set<String> failedKeys = new HashSet<>();
        List<UUID> confirmed = new ArrayList<>(rows.size());
        String failure = null;
        List<Row> pending = rows;
        while (!pending.isEmpty()) {
            List<Row> wave = new ArrayList<>();
            List<Row> later = new ArrayList<>();
            Set<String> keys = new HashSet<>();
            for (Row row : pending) {
                String key = row.destination() + '\n' + row.key();
                if (failedKeys.contains(key)) {
                    continue;
                }
                if (wave.size() < MAX_IN_FLIGHT && keys.add(key)) {
                    wave.add(row);
                } else {
                    later.add(row);
                    // Later rows of a key waiting for this wave wait too, so that they keep their order.
                    keys.add(key);
                }
            }
            for (Outcome outcome : publishWave(wave)) {
                if (outcome.failure() == null) {
                    confirmed.add(outcome.row().id());
                } else {
                    failedKeys.add(
                            outcome.row().destination() + '\n' + outcome.row().key());
                    failure = failure != null ? failure : outcome.failure();
                }
            }
            pending = later;
        }
        return new Published(confirmed, failure);
    }

    /** What became of a row: published and confirmed, or not, and why. */
    private record Outcome(Row row, @Nullable String failure) {}

    private List<Outcome> publishWave(List<Row> rows) {
        List<Outcome> outcomes = new ArrayList<>(rows.size());
        List<Row> sent = new ArrayList<>(rows.size());
        List<CompletableFuture<Boolean>> confirms = new ArrayList<>(rows.size());
        for (Row row : rows) {
            try {
                Confirms confirm = this.destinations.computeIfAbsent(row.destination(), this::prepare);
                // The payload is the jsonb column's text, a JSON object: written into the envelope as it is.
                MessageBuilder<byte[]> message = MessageBuilder.withPayload(this.codec.encode(new EventEnvelope<>(
                                row.id(), row.eventName(), row.occurredAt(), new RawValue(row.payload()))))
                        .setHeader(MessageHeaders.CONTENT_TYPE, "application/json")
                        .setHeader(EventHeaders.EVENT_ID, row.id().toString())
                        .setHeader(EventHeaders.EVENT_NAME, row.eventName());
                CompletableFuture<Boolean> confirmed = switch (confirm) {
                    case RABBIT -> RabbitConfirm.correlate(message, row.id());
                    case SYNC -> {
                        message.setHeader(KAFKA_KEY, row.key().getBytes(UTF_8));
                        yield CompletableFuture.completedFuture(true);
                    }
                    case NONE -> CompletableFuture.completedFuture(true);
                };
                if (!this.streamBridge.send(row.destination(), message.build())) {
                    outcomes.add(new Outcome(row, "the binder did not take event " + row.id()));
                    continue;
                }
                sent.add(row);
                confirms.add(confirmed);
            } catch (RuntimeException ex) {
                outcomes.add(new Outcome(
                        row, "could not publish event %s to %s: %s".formatted(row.id(), row.destination(), ex)));
            }
        }
        long deadline = System.nanoTime() + this.confirmTimeout.toNanos();
        for (int i = 0; i < sent.size(); i++) {
            UUID eventId = sent.get(i).id();
            String failure;
            try {
                failure = confirms.get(i).get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)
                        ? null
                        : "the broker refused (nack) event " + eventId;
            } catch (TimeoutException ex) {
                failure = ("no confirm of event %s within %s (idempotency.outbox.relay.confirm-timeout); on RabbitMQ,"
                                + " check that spring.rabbitmq.publisher-confirm-type is correlated")
                        .formatted(eventId, this.confirmTimeout);
            } catch (ExecutionException ex) {
                failure = "event %s was not confirmed: %s".formatted(eventId, ex.getCause());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                failure = "interrupted while waiting for the broker's confirms";
            }
            outcomes.add(new Outcome(sent.get(i), failure));
        }
        return outcomes;
    }

    /** Sets the destination's producer defaults, before its first publication binds it; says how it confirms. */
    private Confirms prepare(String destination) {
        Binder<?, ?, ?> binder =
                this.binderFactory.getBinder(this.bindings.getBinder(destination), MessageChannel.class);
        if (!(binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended)) {
            return Confirms.NONE;
        }
        BeanWrapper producer = new BeanWrapperImpl(extended.getExtendedProducerProperties(destination));
        if (producer.isWritableProperty("useConfirmHeader")) {
            producer.setPropertyValue("useConfirmHeader", true);
            if (producer.getPropertyValue("routingKeyExpression") == null) {
                producer.setPropertyValue(
                        "routingKeyExpression", new SpelExpressionParser().parseExpression(RABBIT_ROUTING_KEY));
            }
            return Confirms.RABBIT;
        }
        if (producer.isWritableProperty("sync")) {
            producer.setPropertyValue("sync", true);
            return Confirms.SYNC;
        }
        return Confirms.NONE;
    }

    /** Kept apart so that a service without Spring AMQP never loads its classes. */
    private static final class RabbitConfirm {

        static CompletableFuture<Boolean> correlate(MessageBuilder<byte[]> message, UUID eventId) {
            CorrelationData correlation = new CorrelationData(eventId.toString());
            message.setHeader(AmqpHeaders.PUBLISH_CONFIRM_CORRELATION, correlation)
                    .setHeader(AmqpHeaders.MESSAGE_ID, eventId.toString());
            return correlation.getFuture().thenApply(CorrelationData.Confirm::ack);
        }
    }
}
