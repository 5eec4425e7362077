package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.guard.IdempotencyGuard;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.env.Environment;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.InterceptableChannel;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

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
     * @param eventId the event id, read as the guard reads it (from the envelope, or the header that
     *     {@code idempotency.event-id.source} names), or {@code null} when the message carries none it could read
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

    private final ObjectProvider<IdempotencyGuard> guard;

    DeliveryRecorder(ListableBeanFactory beanFactory, Environment environment) {
        this.beanFactory = beanFactory;
        this.environment = environment;
        this.guard = beanFactory.getBeanProvider(IdempotencyGuard.class);
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
     * example, closing the broker connection so that the acknowledgement is lost. An action that has not run when the
     * test ends fails the test ({@link #reset}): no attempt at that event committed, and whatever the test asserted
     * about the lost acknowledgement was not tested.
     */
    public void afterCommit(UUID eventId, Runnable action) {
        this.afterCommit.put(eventId, action);
    }

    /**
     * Forgets the attempts recorded so far and the pending actions; done before each test method by the test kit.
     *
     * @throws IllegalStateException when an {@link #afterCommit} action never ran
     */
    public void reset() {
        Set<UUID> neverRan = Set.copyOf(this.afterCommit.keySet());
        this.attempts.clear();
        this.afterCommit.clear();
        if (!neverRan.isEmpty()) {
            throw new IllegalStateException(("The action after the commit of event(s) %s never ran: no attempt at"
                            + " them committed (were they delivered, and does the service read their ids where the"
                            + " test wrote them?)")
                    .formatted(neverRan));
        }
    }

    /**
     * Installs the recorder on each guarded binding before the bindings start: first on the input channel, so that
     * it sees every attempt, even one whose transaction could not begin, and acts after the commit.
     */
    @Override
    public void start() {
        ChannelInterceptor recording = new ChannelInterceptor() {
            @Override
            public void afterSendCompletion(
                    Message<?> message, MessageChannel channel, boolean sent, @Nullable Exception failure) {
                List<?> bodies = bodies(message);
                for (int index = 0; index < bodies.size(); index++) {
                    Map<String, Object> headers = headers(message, index);
                    DeliveryRecorder.this.attempts.add(
                            new Attempt(eventId(headers, bodies.get(index)), headers, failure));
                }
            }
        };
        // Before the transaction's interceptor, so that its postSend runs before the commit, in the transaction that
        // commits (not in preSend: a transaction whose claim met an outage is begun again after it): the actions run
        // when it commits (after a batch commits too, though the guard then sets rejected messages aside with an
        // exception).
        ChannelInterceptor afterCommit = new ChannelInterceptor() {
            @Override
            public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
                if (DeliveryRecorder.this.afterCommit.isEmpty()
                        || !TransactionSynchronizationManager.isSynchronizationActive()) {
                    return;
                }
                List<UUID> eventIds = new ArrayList<>();
                List<?> bodies = bodies(message);
                for (int index = 0; index < bodies.size(); index++) {
                    UUID eventId = eventId(headers(message, index), bodies.get(index));
                    if (eventId != null) {
                        eventIds.add(eventId);
                    }
                }
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        for (UUID eventId : eventIds) {
                            Runnable action = DeliveryRecorder.this.afterCommit.remove(eventId);
                            if (action != null) {
                                action.run();
                            }
                        }
                    }
                });
            }
        };
        BusinessFunctionProbe probe =
                this.beanFactory.getBeanProvider(BusinessFunctionProbe.class).getIfAvailable();
        for (InterceptableChannel channel : guardedInputChannels()) {
            if (probe != null) {
                // Before the transaction's interceptor: it fails the commit that follows.
                channel.addInterceptor(0, probe.failAtCommit());
            }
            channel.addInterceptor(0, recording);
            channel.addInterceptor(0, afterCommit);
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

    /** The event id as the guard reads it, wherever the service reads ids from. */
    private @Nullable UUID eventId(Map<String, Object> headers, Object payload) {
        if (!(payload instanceof byte[] body)) {
            return null;
        }
        IdempotencyGuard guard = this.guard.getIfAvailable();
        if (guard != null) {
            return guard.eventIdOf(new MessageHeaders(headers), body);
        }
        try {
            return this.codec.read(body).eventId();
        } catch (RejectedMessageException ex) {
            return ex.eventId();
        }
    }
}
