package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.internal.UnbracketedBindingSettings;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation.Answer;
import dev.exactlyonce.idempotency.outbox.PublishConfirmation.Verdict;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.StreamBridge;
import org.springframework.core.env.Environment;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;
import tools.jackson.databind.util.RawValue;

/**
 * Publishes outbox rows in the envelope through the binder, and waits until the broker has them; what became of each
 * row ({@link PublishConfirmation.Verdict}) decides what waits. See docs/outbox.md ("The relay", "What a failure says
 * of a row").
 */
final class OutboxSender {

    record Row(UUID id, String destination, String key, String eventName, String payload, Instant occurredAt) {

        /** What keeps the order: the rows of one key of one destination. */
        String orderKey() {
            return orderKey(this.destination, this.key);
        }

        static String orderKey(String destination, String key) {
            return destination + '\n' + key;
        }
    }

    record Refusal(Row row, String reason) {}

    /**
     * What a publication did: each {@code refused} row counts an attempt; {@code unanswered} is the first reason rows
     * were held rather than published (no answer, or a refused route); {@code held} counts the keys that waited.
     */
    record Published(
            List<UUID> confirmed,
            List<Refusal> refused,
            @Nullable String unanswered,
            int held) {

        /** The first reason a row was not published, if one was not. */
        @Nullable
        String failure() {
            return this.unanswered != null
                    ? this.unanswered
                    : this.refused.isEmpty() ? null : this.refused.get(0).reason();
        }
    }

    /** A destination of a binder that confirms nothing: a row counts as confirmed once the binder took it. */
    private static final PublishConfirmation BINDER_TOOK_IT = new PublishConfirmation() {

        @Override
        public boolean prepare(Binder<?, ?, ?> binder, String destination, Object producerProperties) {
            return true;
        }

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
            return CompletableFuture.completedFuture(Answer.CONFIRMED);
        }

        @Override
        public Verdict failed(Throwable failure) {
            return Verdict.UNEXPLAINED;
        }
    };

    /** The most rows in flight: each holds a channel until confirmed, within Spring AMQP's channel cache (25). */
    static final int MAX_IN_FLIGHT = 20;

    /** How long a run waits when only sends that wait for the broker are left; then it ends, and they go on. */
    static final Duration PATIENCE = Duration.ofSeconds(2);

    /** The most sends that wait for the broker at once, ended runs' included: each holds a thread and its key. */
    static final int MAX_WAITING_SENDS = 10 * MAX_IN_FLIGHT;

    /** The most late confirmations kept: past it they are forgotten, and their rows sent again. */
    private static final int MAX_LATE_CONFIRMED = 10_000;

    private final StreamBridge streamBridge;

    private final BinderFactory binderFactory;

    private final BindingServiceProperties bindings;

    private final BindingService bindingService;

    private final EnvelopeCodec codec;

    private final Environment environment;

    private final Duration confirmTimeout;

    private final List<PublishConfirmation> confirmations;

    private final Map<String, PublishConfirmation> destinations = new ConcurrentHashMap<>();

    /** Refused destinations, never prepared again: a half-done preparation would pass the next check as prepared. */
    private final Map<String, StartupRefusal> refused = new ConcurrentHashMap<>();

    /** Sends the rows, one at a time, so that a run ends within {@code confirm-timeout} even when a send blocks. */
    private @Nullable ExecutorService sender;

    /** Sends the rows that wait for the broker (Kafka's {@code sync}): a thread each, so keys go together. */
    private @Nullable ExecutorService waitingSenders;

    /** The keys ({@link Row#orderKey()}) whose send on those threads has not returned: later runs leave them alone. */
    private final Map<String, Object> sending = new ConcurrentHashMap<>();

    /** Rows confirmed after their run ended: the next run marks them published without sending them again. */
    private final Set<UUID> lateConfirmed = ConcurrentHashMap.newKeySet();

    private final Holds holds;

    private volatile Runnable returned = () -> {};

    /** Counts the relay's stops: a run under way when the relay stops ends at once. */
    private final AtomicInteger closings = new AtomicInteger();

    OutboxSender(
            StreamBridge streamBridge,
            BinderFactory binderFactory,
            BindingServiceProperties bindings,
            BindingService bindingService,
            EnvelopeCodec codec,
            Environment environment,
            Duration confirmTimeout,
            Duration firstHold,
            Duration longestHold,
            List<PublishConfirmation> confirmations) {
        this.streamBridge = streamBridge;
        this.binderFactory = binderFactory;
        this.bindings = bindings;
        this.bindingService = bindingService;
        this.codec = codec;
        this.environment = environment;
        this.confirmTimeout = confirmTimeout;
        this.holds = new Holds(firstHold, longestHold);
        this.confirmations = List.copyOf(confirmations);
    }

    Holds holds() {
        return this.holds;
    }

    /** Runs {@code action} when a send that waited for the broker returns, so that its key's next row goes soon. */
    void onReturn(Runnable action) {
        this.returned = action;
    }

    boolean sending(String orderKey) {
        return this.sending.containsKey(orderKey);
    }

    /**
     * Checks that the destination's binder confirms: otherwise no row is ever marked published, and all go again.
     *
     * @throws StartupRefusal when it does not
     */
    void check(String destination) {
        this.destinations.computeIfAbsent(destination, this::prepare);
    }

    /**
     * Publishes the rows within {@code confirm-timeout}, each key's in order: its next row once the previous one is
     * confirmed (two channels do not keep each other's order). A held key, or one whose earlier send is out, waits.
     */
    Published publish(List<Row> rows) {
        long deadline = System.nanoTime() + this.confirmTimeout.toNanos();
        int closing = this.closings.get();
        Run run = new Run(rows);
        while (run.sendReady() > 0) {
            boolean waiting = run.onlyWaitingSends();
            long until = waiting ? Math.min(deadline, System.nanoTime() + PATIENCE.toNanos()) : deadline;
            Outcome outcome = poll(run.outcomes, until);
            if (outcome == null && waiting && until < deadline) {
                return run.end(
                        ("no acknowledgement of %d event(s) within %s: their partitions have no leader, or the broker"
                                        + " is slow; their sends go on (the producer's delivery.timeout.ms), and their"
                                        + " keys wait for them")
                                .formatted(run.inFlight.size(), PATIENCE),
                        true);
            }
            if (outcome == null) {
                return run.end(
                        ("no confirm of %d event(s) within %s (idempotency.outbox.relay.confirm-timeout): the broker is"
                                        + " slow or cannot be reached")
                                .formatted(run.inFlight.size(), this.confirmTimeout),
                        false);
            }
            if (this.closings.get() != closing) {
                return run.end("the relay stopped while event(s) were in flight", false);
            }
            run.take(outcome);
        }
        return run.end(null, false);
    }

    private final class Run {

        /** The rows not confirmed yet, by key, in their order. */
        private final Map<String, Deque<Row>> keys = new LinkedHashMap<>();

        private final Deque<Deque<Row>> ready;

        private final BlockingQueue<Outcome> outcomes = new LinkedBlockingQueue<>();

        /** The sends submitted, each with its key if it waits for the broker. */
        private final Map<Future<?>, @Nullable String> sends = new LinkedHashMap<>();

        private final Set<Row> inFlight = new LinkedHashSet<>();

        private final List<UUID> confirmed;

        private final List<Refusal> refused = new ArrayList<>();

        private final Set<String> confirming = new HashSet<>();

        /** The destinations a row of which went unanswered, and why: no further row of theirs is sent. */
        private final Map<String, Row> unanswered = new LinkedHashMap<>();

        /** The rows whose failure told nothing, and why: weighed once the run knows what its destinations did. */
        private final Map<Row, String> unexplained = new LinkedHashMap<>();

        /** Why rows were held rather than published, the first time. */
        private @Nullable String held;

        /** How many keys waited, their next row held, or their earlier send not returned. */
        private int waiting;

        private final Set<Row> waitingSends = new HashSet<>();

        /** Whether the run ended: outcomes that come after are late. */
        private boolean ended;

        Run(List<Row> rows) {
            rows.forEach(row -> this.keys
                    .computeIfAbsent(row.orderKey(), key -> new ArrayDeque<>())
                    .add(row));
            this.confirmed = new ArrayList<>(rows.size());
            // A key's first row that a send of an ended run confirmed is marked, not sent again.
            this.keys.values().forEach(key -> {
                while (!key.isEmpty()
                        && OutboxSender.this.lateConfirmed.remove(key.peek().id())) {
                    confirmed(key.poll());
                }
            });
            this.keys.values().removeIf(Deque::isEmpty);
            this.ready = new ArrayDeque<>(this.keys.values());
        }

        boolean onlyWaitingSends() {
            return this.waitingSends.size() == this.inFlight.size();
        }

        /** Sends each ready key's next row, up to {@value OutboxSender#MAX_IN_FLIGHT} in flight; returns how many. */
        int sendReady() {
            while (this.inFlight.size() < MAX_IN_FLIGHT && !this.ready.isEmpty()) {
                Row row = this.ready.poll().peek();
                if (this.unanswered.containsKey(row.destination()) || OutboxSender.this.holds.holds(row)) {
                    this.waiting++;
                } else {
                    start(row);
                }
            }
            return this.inFlight.size();
        }

        private void start(Row row) {
            boolean waits = waitsForTheBroker(row.destination());
            // This send's claim on its key: a send of another run, or of before a stop, lets go of its own only.
            Object claim = new Object();
            if (waits && OutboxSender.this.sending.putIfAbsent(row.orderKey(), claim) != null) {
                // An earlier run's send still waits for the broker: the key waits, and the relay wakes when it returns.
                this.waiting++;
                return;
            }
            Future<?> sent;
            try {
                sent = (waits ? waitingSenders() : sender())
                        .submit(() -> send(row).whenComplete((outcome, ex) -> returned(outcome, waits ? claim : null)));
            } catch (RejectedExecutionException ex) {
                // Every waiting send's thread is taken, or the relay stops: the key waits for a later run.
                if (waits) {
                    OutboxSender.this.sending.remove(row.orderKey(), claim);
                }
                this.waiting++;
                return;
            }
            this.sends.put(sent, waits ? row.orderKey() : null);
            this.inFlight.add(row);
            if (waits) {
                this.waitingSends.add(row);
            }
        }

        /**
         * Tells the run what became of a row, or keeps a late confirmation; a send that waited for the broker then lets
         * its key go (after the confirmation is kept) and wakes the relay up.
         */
        private void returned(Outcome outcome, @Nullable Object claim) {
            synchronized (this) {
                if (this.ended && outcome.verdict() == Verdict.CONFIRMED) {
                    lateConfirmed(outcome.row().id());
                }
                if (claim != null) {
                    OutboxSender.this.sending.remove(outcome.row().orderKey(), claim);
                }
                if (!this.ended) {
                    this.outcomes.add(outcome);
                }
            }
            if (claim != null) {
                OutboxSender.this.returned.run();
            }
        }

        void take(Outcome outcome) {
            Row row = outcome.row();
            this.inFlight.remove(row);
            this.waitingSends.remove(row);
            String failure = String.valueOf(outcome.failure());
            switch (outcome.verdict()) {
                case CONFIRMED -> {
                    confirmed(row);
                    Deque<Row> key = this.keys.get(row.orderKey());
                    key.poll();
                    if (!key.isEmpty()) {
                        this.ready.add(key);
                    }
                }
                case ROW_REFUSED -> this.refused.add(new Refusal(row, failure));
                case ROUTE_REFUSED -> {
                    OutboxSender.this.holds.hold(Holds.Kind.ROUTE, row, failure);
                    heldFor(failure);
                }
                case UNANSWERED -> unanswered(row, failure);
                case UNEXPLAINED -> this.unexplained.put(row, failure);
            }
        }

        private void confirmed(Row row) {
            this.confirmed.add(row.id());
            this.confirming.add(row.destination());
            OutboxSender.this.holds.confirmed(row);
        }

        private void unanswered(Row row, String failure) {
            this.unanswered.putIfAbsent(row.destination(), row);
            heldFor(failure);
        }

        private void heldFor(String failure) {
            if (this.held == null) {
                this.held = failure;
            }
        }

        /**
         * Holds the destinations that answered nothing and weighs the failures that told nothing. {@code givenUp} says
         * why the rows still in flight were given up, if they were; with {@code sendsGoOn} their sends go on, and their
         * destination is held only if it confirmed nothing lately (a leaderless partition holds up its own keys only).
         */
        Published end(@Nullable String givenUp, boolean sendsGoOn) {
            synchronized (this) {
                this.ended = true;
            }
            // What came in since the run last looked is taken: later outcomes are late.
            for (Outcome outcome = this.outcomes.poll(); outcome != null; outcome = this.outcomes.poll()) {
                take(outcome);
            }
            Holds holds = OutboxSender.this.holds;
            if (givenUp != null) {
                for (Row row : List.copyOf(this.inFlight)) {
                    if (sendsGoOn && holds.confirmedLately(row.destination())) {
                        this.waiting++;
                        heldFor(givenUp);
                    } else {
                        unanswered(row, givenUp);
                    }
                }
            }
            // A send still waiting for the sender (behind one stuck in the network) is not made once the run ended. A
            // send that waits for the broker is under way (each has a thread): it goes on, and its key waits for it.
            this.sends.forEach((send, key) -> {
                if (key == null) {
                    send.cancel(false);
                }
            });
            this.unanswered.forEach((destination, row) -> {
                if (!this.confirming.contains(destination)) {
                    holds.hold(Holds.Kind.DESTINATION, row, String.valueOf(this.held));
                }
            });
            this.unexplained.forEach((row, failure) -> {
                if (this.confirming.contains(row.destination()) || holds.confirmedLately(row.destination())) {
                    this.refused.add(new Refusal(row, failure));
                } else {
                    holds.hold(Holds.Kind.KEY, row, failure);
                    heldFor(failure);
                }
            });
            return new Published(this.confirmed, this.refused, this.held, this.waiting);
        }
    }

    private void lateConfirmed(UUID id) {
        if (this.lateConfirmed.size() >= MAX_LATE_CONFIRMED) {
            // Rows another instance published, or a later run sent again and marked: forgotten, at worst sent again.
            this.lateConfirmed.clear();
        }
        this.lateConfirmed.add(id);
    }

    private boolean waitsForTheBroker(String destination) {
        try {
            return this.destinations.computeIfAbsent(destination, this::prepare).waitsForTheBroker();
        } catch (RuntimeException ex) {
            // The send fails the same way, and tells it as the row's failure.
            return false;
        }
    }

    private synchronized ExecutorService sender() {
        if (this.sender == null) {
            this.sender = Executors.newSingleThreadExecutor(runnable -> {
                Thread thread = new Thread(runnable, "idempotency-outbox-sender");
                thread.setDaemon(true);
                return thread;
            });
        }
        return this.sender;
    }

    private synchronized ExecutorService waitingSenders() {
        if (this.waitingSenders == null) {
            AtomicInteger threads = new AtomicInteger();
            // A thread per send, none queued (a send waits for a thread no longer than for the broker); threads idle
            // for a minute go: a relay that stopped, or that publishes rarely, keeps none.
            this.waitingSenders = new ThreadPoolExecutor(
                    0, MAX_WAITING_SENDS, 1, TimeUnit.MINUTES, new SynchronousQueue<>(), runnable -> {
                        Thread thread = new Thread(runnable, "idempotency-outbox-sender-" + threads.incrementAndGet());
                        thread.setDaemon(true);
                        return thread;
                    });
        }
        return this.waitingSenders;
    }

    /** Lets the senders' threads go, the relay stopped: a run still waiting ends with the outcomes that came. */
    synchronized void close() {
        this.closings.incrementAndGet();
        // The sends interrupted, or still queued for the single sender, may never say they returned.
        this.sending.clear();
        if (this.sender != null) {
            this.sender.shutdownNow();
            this.sender = null;
        }
        if (this.waitingSenders != null) {
            this.waitingSenders.shutdownNow();
            this.waitingSenders = null;
        }
    }

    private record Outcome(Row row, @Nullable String failure, Verdict verdict) {}

    private static @Nullable Outcome poll(BlockingQueue<Outcome> outcomes, long deadline) {
        try {
            return outcomes.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** Sends a row; completes once the broker answered, never exceptionally. */
    private CompletableFuture<Outcome> send(Row row) {
        PublishConfirmation confirmation = BINDER_TOOK_IT;
        try {
            confirmation = this.destinations.computeIfAbsent(row.destination(), this::prepare);
            // The payload is the jsonb column's text, a JSON object: written into the envelope as it is.
            byte[] envelope = this.codec.encode(
                    new EventEnvelope<>(row.id(), row.eventName(), row.occurredAt(), new RawValue(row.payload())));
            CompletableFuture<Answer> published =
                    confirmation.publish(row.destination(), envelope, row.id(), row.eventName());
            if (published != null) {
                return published.thenApply(answer -> new Outcome(row, answer.failure(), answer.verdict()));
            }
            MessageBuilder<byte[]> message = MessageBuilder.withPayload(envelope)
                    .setHeader(MessageHeaders.CONTENT_TYPE, "application/json")
                    .setHeader(EventHeaders.EVENT_ID, row.id().toString())
                    .setHeader(EventHeaders.EVENT_NAME, row.eventName());
            CompletableFuture<Outcome> answered = confirmation
                    .answer(message, row.id(), row.key())
                    .thenApply(answer -> new Outcome(row, answer.failure(), answer.verdict()));
            if (!this.streamBridge.send(row.destination(), message.build())) {
                return CompletableFuture.completedFuture(
                        new Outcome(row, "the binder did not take event " + row.id(), Verdict.UNANSWERED));
            }
            return answered;
        } catch (RuntimeException | Error ex) {
            // An Error (a class missing, a heap exhausted by this payload) fails this row only, not the relay.
            String failure = "could not publish event %s to %s: %s".formatted(row.id(), row.destination(), ex);
            // A destination its settings refuse holds its route: the row is not at fault, and goes once they are fixed.
            Verdict verdict = interrupted(ex)
                    ? Verdict.UNANSWERED
                    : ex instanceof StartupRefusal ? Verdict.ROUTE_REFUSED : confirmation.failed(ex);
            return CompletableFuture.completedFuture(new Outcome(row, failure, verdict));
        }
    }

    /** Whether the send was interrupted (the relay stopping) rather than answered: it says nothing of the row. */
    private static boolean interrupted(Throwable ex) {
        return Thread.currentThread().isInterrupted() || Failures.find(ex, InterruptedException.class) != null;
    }

    /** Sets the destination's producer defaults before its first publication binds it; says how its binder confirms. */
    private PublishConfirmation prepare(String destination) {
        StartupRefusal refusal = this.refused.get(destination);
        if (refusal != null) {
            throw refusal;
        }
        try {
            return preparedFor(destination);
        } catch (StartupRefusal ex) {
            this.refused.put(destination, ex);
            throw ex;
        }
    }

    private PublishConfirmation preparedFor(String destination) {
        UnbracketedBindingSettings.refuse(this.environment, destination);
        Binder<?, ?, ?> binder =
                this.binderFactory.getBinder(this.bindings.getBinder(destination), MessageChannel.class);
        if (!(binder instanceof ExtendedPropertiesBinder<?, ?, ?> extended)) {
            return BINDER_TOOK_IT;
        }
        Object producer = extended.getExtendedProducerProperties(destination);
        boolean bound = this.bindingService.getProducerBinding(destination) != null;
        for (PublishConfirmation confirmation : this.confirmations) {
            boolean prepared = confirmation.prepared(producer);
            if (confirmation.prepare(binder, destination, producer)) {
                if (bound && !prepared) {
                    throw new StartupRefusal(
                            ("The outbox relay publishes to %s through a binding of that name, and the service bound"
                                            + " one before the relay could set it up (spring.cloud.stream.output-bindings,"
                                            + " or a StreamBridge send as the service starts): the relay would publish"
                                            + " without the broker's confirms, and mark rows published that the broker"
                                            + " never took, or none at all")
                                    .formatted(destination),
                            ("Remove %s from spring.cloud.stream.output-bindings (the relay binds it), or publish your"
                                            + " own messages to a binding of another name")
                                    .formatted(destination));
                }
                return confirmation;
            }
        }
        return BINDER_TOOK_IT;
    }
}
