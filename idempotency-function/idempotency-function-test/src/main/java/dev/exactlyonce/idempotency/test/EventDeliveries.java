package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.test.InputDestination;
import org.springframework.cloud.stream.binder.test.TestChannelBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.core.env.Environment;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.util.MimeTypeUtils;

/**
 * Delivers events to the destination of the service's guarded bindings through the test binder, as the broker would
 * (every binding of that destination receives each message): the binder, the
 * transaction, the guard and the business function all run, on the calling thread (or on a thread of their own for
 * {@link #deliverAsync}). A delivery returns once the message was processed, dead-lettered or dropped; assert the
 * outcome on the database.
 */
public final class EventDeliveries {

    private final InputDestination input;

    private final TestChannelBinder binder;

    private final EnvelopeCodec codec;

    private final String destination;

    EventDeliveries(
            InputDestination input,
            TestChannelBinder binder,
            EnvelopeCodec codec,
            BindingServiceProperties bindings,
            Environment environment) {
        this.input = input;
        this.binder = binder;
        this.codec = codec;
        this.destination = guardedDestination(bindings, environment);
    }

    /** Delivers the event once. */
    public void deliver(EventEnvelope<?> event) {
        deliver(event, 1);
    }

    /** Delivers the same event {@code times} times, one after the other. */
    public void deliver(EventEnvelope<?> event, int times) {
        byte[] body = this.codec.encode(event);
        for (int i = 0; i < times; i++) {
            deliverBody(body);
        }
    }

    /**
     * Delivers the event, and again each time the service gives it back to the binder to be delivered again (as it
     * does during an outage), as a broker would, until it is processed, dead-lettered or dropped.
     *
     * @throws AssertionError when it is still given back after {@code limit}
     */
    public void deliverUntilTaken(EventEnvelope<?> event, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            try {
                deliver(event);
                return;
            } catch (RuntimeException ex) {
                if (!givenBack(ex)) {
                    throw ex;
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(
                            "event %s still given back after %s".formatted(event.eventId(), limit), ex);
                }
            }
        }
    }

    /** Starts {@link #deliverUntilTaken} on a new thread. */
    public CompletableFuture<Void> deliverUntilTakenAsync(EventEnvelope<?> event, Duration limit) {
        return CompletableFuture.runAsync(
                () -> deliverUntilTaken(event, limit), runnable -> new Thread(runnable, "delivery").start());
    }

    private static boolean givenBack(Throwable failure) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            // By name, the library's own subclasses included: Spring AMQP is on the class path with RabbitMQ only.
            for (Class<?> type = cause.getClass(); type != null; type = type.getSuperclass()) {
                String name = type.getSimpleName();
                if (name.equals("ImmediateRequeueAmqpException") || name.equals("OutageException")) {
                    return true;
                }
            }
            if (cause.getCause() == cause) {
                break;
            }
        }
        return false;
    }

    /** Delivers the events as one batch, to a binding in batch mode: one message whose payload is their bodies. */
    public void deliverBatch(List<? extends EventEnvelope<?>> events) {
        deliverMessage(batch(events));
    }

    /** Starts the delivery of one batch on a new thread. */
    public CompletableFuture<Void> deliverBatchAsync(List<? extends EventEnvelope<?>> events) {
        Message<byte[]> batch = batch(events);
        return CompletableFuture.runAsync(
                () -> deliverMessage(batch), runnable -> new Thread(runnable, "delivery").start());
    }

    /** Delivers message bodies as one batch, as they are (for bodies that are not valid envelopes). */
    @SuppressWarnings("unchecked")
    public void deliverBatchBodies(List<byte[]> bodies) {
        deliverMessage((Message<byte[]>) (Message<?>) MessageBuilder.withPayload(List.copyOf(bodies))
                .setHeader(MessageHeaders.CONTENT_TYPE, MimeTypeUtils.APPLICATION_JSON_VALUE)
                .build());
    }

    @SuppressWarnings("unchecked")
    private Message<byte[]> batch(List<? extends EventEnvelope<?>> events) {
        List<byte[]> bodies = events.stream().map(this.codec::encode).toList();
        return (Message<byte[]>) (Message<?>) MessageBuilder.withPayload(bodies)
                .setHeader(MessageHeaders.CONTENT_TYPE, MimeTypeUtils.APPLICATION_JSON_VALUE)
                .build();
    }

    /** Delivers a message body as it is, for messages that are not valid envelopes. */
    public void deliverBody(byte[] body) {
        deliverMessage(message(body));
    }

    /** Delivers a message as it is, headers included (for events whose id travels in a header). */
    public void deliverMessage(Message<byte[]> message) {
        this.input.send(message, this.destination);
    }

    /** Starts one delivery of the event on a new thread. */
    public CompletableFuture<Void> deliverAsync(EventEnvelope<?> event) {
        byte[] body = this.codec.encode(event);
        return CompletableFuture.runAsync(
                () -> deliverBody(body), runnable -> new Thread(runnable, "delivery").start());
    }

    /** Delivers {@code copies} copies of the event on as many threads, released at the same moment; waits for all. */
    public void deliverConcurrently(EventEnvelope<?> event, int copies) {
        byte[] body = this.codec.encode(event);
        CountDownLatch start = new CountDownLatch(1);
        List<CompletableFuture<Void>> deliveries = new ArrayList<>();
        for (int i = 0; i < copies; i++) {
            deliveries.add(CompletableFuture.runAsync(
                    () -> {
                        awaitQuietly(start);
                        deliverBody(body);
                    },
                    runnable -> new Thread(runnable, "delivery").start()));
        }
        start.countDown();
        CompletableFuture.allOf(deliveries.toArray(CompletableFuture[]::new)).join();
    }

    /** The error message of the last delivery the binder gave up on (after its last attempt), if any. */
    public @Nullable Message<?> lastError() {
        return this.binder.getLastError();
    }

    /** Forgets the last error. */
    public void resetLastError() {
        this.binder.resetLastError();
    }

    private static Message<byte[]> message(byte[] body) {
        return MessageBuilder.withPayload(body)
                .setHeader(MessageHeaders.CONTENT_TYPE, MimeTypeUtils.APPLICATION_JSON_VALUE)
                .build();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    private static String guardedDestination(BindingServiceProperties bindings, Environment environment) {
        List<String> destinations = GuardedDefinitions.bindingNames(environment).stream()
                .map(bindings::getBindingDestination)
                .distinct()
                .toList();
        if (destinations.size() != 1) {
            throw new IllegalStateException("EventDeliveries delivers to the destination of the bindings whose"
                    + " definition starts with idempotencyGuard, and they have " + destinations.size() + ": "
                    + destinations);
        }
        return destinations.get(0);
    }
}
