package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.GuardedDefinitions;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.env.Environment;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.InterceptableChannel;

/**
 * Records every attempt at a message of the service's guarded bindings, on any binder: the event id, the message
 * headers as the binder delivered them, and the failure if the attempt failed; an attempt at a batch counts as an
 * attempt at each of its messages, with that message's headers. It can also run an action right after
 * an attempt committed and before the binder acknowledges the message, to lose that acknowledgement.
 */
public final class DeliveryRecorder implements SmartLifecycle {

    /**
     * One attempt at a message.
     *
     * @param eventId the envelope's event id, or {@code null} when the body is not an envelope
     * @param headers the headers of the message as the binder delivered it
     * @param failure what the attempt threw, or {@code null} when it committed
     */
    public record Attempt(
            @Nullable UUID eventId,
            Map<String, Object> headers,
            @Nullable Exception failure) {

        /** Whether the broker marked the message as delivered before ({@code amqp_redelivered}). */
        public boolean redelivered() {
            return Boolean.TRUE.equals(this.headers.get("amqp_redelivered"));
        }
    }

    private final ListableBeanFactory beanFactory;

    private final Environment environment;

    private final EnvelopeCodec codec = new EnvelopeCodec();

    private final List<Attempt> attempts = new CopyOnWriteArrayList<>();

    private final Map<UUID, Runnable> afterCommit = new ConcurrentHashMap<>();

    private volatile boolean running;

    DeliveryRecorder(ListableBeanFactory beanFactory, Environment environment) {
        this.beanFactory = beanFactory;
        this.environment = environment;
    }

    /** The attempts at messages carrying this event id, in order. */
    public List<Attempt> attempts(UUID eventId) {
        return this.attempts.stream()
                .filter(attempt -> eventId.equals(attempt.eventId()))
                .toList();
    }

    /** Every attempt recorded so far, in order. */
    public List<Attempt> attempts() {
        return List.copyOf(this.attempts);
    }

    /**
     * Runs the action once, after the next attempt at this event commits and before the binder acknowledges it; for
     * example, closing the broker connection so that the acknowledgement is lost.
     */
    public void afterCommit(UUID eventId, Runnable action) {
        this.afterCommit.put(eventId, action);
    }

    /** Forgets the attempts recorded so far and the pending actions. */
    public void reset() {
        this.attempts.clear();
        this.afterCommit.clear();
    }

    /**
     * Installs the recorder on each guarded binding before the bindings start: first on the input channel, so that
     * it sees every attempt, even one whose transaction could not begin; and last, to act after the commit.
     */
    @Override
    public void start() {
        ChannelInterceptor recording = new ChannelInterceptor() {
            @Override
            public void afterSendCompletion(
                    Message<?> message, MessageChannel channel, boolean sent, @Nullable Exception failure) {
                List<?> bodies = bodies(message);
                for (int index = 0; index < bodies.size(); index++) {
                    DeliveryRecorder.this.attempts.add(
                            new Attempt(eventId(bodies.get(index)), headers(message, index), failure));
                }
            }
        };
        ChannelInterceptor afterCommit = new ChannelInterceptor() {
            @Override
            public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
                for (Object body : bodies(message)) {
                    UUID eventId = eventId(body);
                    Runnable action = eventId != null ? DeliveryRecorder.this.afterCommit.remove(eventId) : null;
                    if (action != null) {
                        action.run();
                    }
                }
            }
        };
        for (InterceptableChannel channel : guardedInputChannels()) {
            channel.addInterceptor(0, recording);
            channel.addInterceptor(afterCommit);
        }
        this.running = true;
    }

    @Override
    public void stop() {
        this.running = false;
    }

    @Override
    public boolean isRunning() {
        return this.running;
    }

    /** Before the bindings, which start in a later phase. */
    @Override
    public int getPhase() {
        return 0;
    }

    private List<InterceptableChannel> guardedInputChannels() {
        return GuardedDefinitions.bindingNames(this.environment).stream()
                .map(bindingName -> this.beanFactory.getBean(bindingName, InterceptableChannel.class))
                .toList();
    }

    /** The headers of the message at that index: its own, or of a batch, that message's ({@link EventHeaders}). */
    private static Map<String, Object> headers(Message<?> message, int index) {
        return message.getPayload() instanceof List<?>
                ? Map.copyOf(EventHeaders.ofMessageInBatch(message, index))
                : Map.copyOf(message.getHeaders());
    }

    /** The bodies of the message: its payload, or each of a batch's. */
    private static List<?> bodies(Message<?> message) {
        return message.getPayload() instanceof List<?> batch ? batch : List.of(message.getPayload());
    }

    private @Nullable UUID eventId(Object payload) {
        if (!(payload instanceof byte[] body)) {
            return null;
        }
        try {
            return this.codec.decode(body).eventId();
        } catch (RejectedMessageException ex) {
            return ex.eventId();
        }
    }
}
