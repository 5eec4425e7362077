package dev.exactlyonce.deadletters;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.ReturnListener;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.LogSafe;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.binder.rabbit.RabbitDeadLetters;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.io.IOException;
import java.io.PrintStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Replays or discards the dead letters of a queue ({@code <queue>.dlq}) that a {@link Selection} takes, by event id or
 * cause. A replay publishes each to {@code <queue>} through the queue's replay exchange ({@code <queue>.replay}, bound
 * to the queue and its dead-letter queue alone), with publisher confirms, then acknowledges it; what is not taken goes
 * to the back of the dead-letter queue. It takes at most what the queue held when it started, and is safe to run again:
 * a crash between a publish and its acknowledgement leaves a copy that the service's guard discards. A dead letter the
 * broker dead-lettered itself, or past the service's replay horizon, is left where it is, with the reason. See
 * docs/operations.md, "Replaying dead letters".
 */
public final class DeadLetterReplay {

    /** How many times a dead letter was replayed: a header of each replay. */
    public static final String REPLAY_COUNT = "x-replay-count";

    /** When it was last replayed. */
    public static final String REPLAYED_AT = "x-replayed-at";

    private static final long CONFIRM_TIMEOUT_MS = 10_000;

    /** The reasons the broker dead-letters a message of a queue for, on its own. */
    private static final Set<String> BROKERS_DEATHS = Set.of("expired", "maxlen", "delivery_limit");

    /** The headers a service may read the event id from: the header source's default, and CloudEvents' id. */
    private static final List<String> ID_HEADERS = List.of(EventHeaders.EVENT_ID, "ce_id", "ce-id");

    private static final EnvelopeCodec CODEC = new EnvelopeCodec();

    private final PrintStream out;

    /**
     * A replay that reports on {@code out}: what the queue holds, each dead letter refused or skipped (each listed, in
     * a {@link Action#LIST}), progress every 100 messages, and the counts at the end.
     */
    public DeadLetterReplay(PrintStream out) {
        this.out = out;
    }

    /** What is done with the dead letters selected. */
    public enum Action {
        /** Nothing: each is listed with what a replay would do (each goes to the back of its queue, unchanged). */
        LIST,
        /** Moved back to their queue, through its replay exchange. */
        REPLAY,
        /** Taken out of the dead-letter queue for good. */
        DISCARD
    }

    /**
     * The dead letters an action takes: those of the given event ids, and of the given cause ({@link DeadLetterCause});
     * all of them when neither is given.
     *
     * @param eventIds the event ids; empty: any
     * @param cause the cause; {@code null}: any
     */
    public record Selection(Set<UUID> eventIds, @Nullable String cause) {

        public Selection {
            eventIds = Set.copyOf(eventIds);
        }

        /** Every dead letter of the queue. */
        public static Selection all() {
            return new Selection(Set.of(), null);
        }

        /** The dead letters of these events; all of them when the set is empty. */
        public static Selection events(Set<UUID> eventIds) {
            return new Selection(eventIds, null);
        }

        /** The dead letters of this cause. */
        public static Selection cause(String cause) {
            return new Selection(Set.of(), cause);
        }

        boolean selects(@Nullable UUID eventId, String cause) {
            return (this.eventIds.isEmpty() || (eventId != null && this.eventIds.contains(eventId)))
                    && (this.cause == null || this.cause.equals(cause));
        }

        @Override
        public String toString() {
            if (this.eventIds.isEmpty() && this.cause == null) {
                return "all";
            }
            return (this.eventIds.isEmpty() ? "" : "event(s) " + this.eventIds)
                    + (this.eventIds.isEmpty() || this.cause == null ? "" : " of ")
                    + (this.cause == null ? "" : "cause " + LogSafe.of(this.cause));
        }
    }

    /**
     * Whether the service would take a dead letter back: it does only while it keeps its record of dead-lettering it,
     * for its dead-letter retention (the replay horizon); a replay past it, or of an event it never dead-lettered, would
     * be dead-lettered again.
     */
    @FunctionalInterface
    public interface Horizon {

        /** No horizon known here: the service's guard decides alone. */
        Horizon NONE = eventId -> null;

        /**
         * Why the event's dead letter is left where it is, or {@code null} when it is replayed.
         *
         * @param eventId the dead letter's event id
         */
        @Nullable
        Verdict check(UUID eventId);
    }

    /**
     * Why a dead letter selected is left where it is.
     *
     * @param outcome {@link Outcome#SKIPPED} or {@link Outcome#REFUSED}
     * @param reason why, for the operator
     */
    public record Verdict(Outcome outcome, String reason) {

        /** Past the replay horizon, or not to be replayed now. */
        public static Verdict skip(String reason) {
            return new Verdict(Outcome.SKIPPED, reason);
        }

        /** Not to be replayed as it is. */
        public static Verdict refuse(String reason) {
            return new Verdict(Outcome.REFUSED, reason);
        }
    }

    /**
     * An action on the dead letters of a queue.
     *
     * @param queue the service's queue, whose dead-letter queue is {@code <queue>.dlq}
     * @param action what is done with those selected
     * @param selection those selected
     * @param horizon which a replay skips as past the replay horizon
     */
    public record Request(String queue, Action action, Selection selection, Horizon horizon, int limit) {

        public static Request of(String queue, Action action, Selection selection) {
            return new Request(queue, action, selection, Horizon.NONE, Integer.MAX_VALUE);
        }

        public Request withHorizon(Horizon horizon) {
            return new Request(this.queue, this.action, this.selection, horizon, this.limit);
        }

        /**
         * At most {@code limit} dead letters selected, the first in queue order: those a list showed, for an action
         * confirmed on what it showed (the ones that came after it are kept).
         */
        public Request withLimit(int limit) {
            return new Request(this.queue, this.action, this.selection, this.horizon, limit);
        }
    }

    /** What was done with one dead letter selected (in a {@link Action#LIST}, what would be). */
    public enum Outcome {
        REPLAYED,
        DISCARDED,
        /** Left in the dead-letter queue: it cannot be replayed as it is. */
        REFUSED,
        /** Left in the dead-letter queue: past the replay horizon. */
        SKIPPED
    }

    /**
     * A dead letter selected, and what was done with it.
     *
     * @param eventId its event id, where it has one
     * @param cause its cause
     * @param outcome what was done
     * @param reason why it was refused or skipped
     */
    public record Handled(
            @Nullable UUID eventId,
            String cause,
            Outcome outcome,
            @Nullable String reason) {}

    /**
     * What an action did.
     *
     * @param replayed the dead letters moved back to the queue
     * @param discarded the dead letters taken away
     * @param kept the dead letters not selected, left in the dead-letter queue
     * @param refused the dead letters selected that cannot be replayed as they are, left in the dead-letter queue
     * @param skipped the dead letters selected past the replay horizon, left in the dead-letter queue
     * @param unexamined the dead letters the queue held at the start that were not there to take (another reader held
     *     them meanwhile): run it again for them
     */
    public record Result(int replayed, int discarded, int kept, int refused, int skipped, int unexamined) {

        /** The dead letters the action selected. */
        public int selected() {
            return this.replayed + this.discarded + this.refused + this.skipped;
        }
    }

    /**
     * Replays the dead letters of {@code queue}, as the replay command does: all of them when {@code eventIds} is
     * empty; with {@code dryRun}, lists them and replays nothing.
     */
    public Result replay(Connection connection, String queue, Set<UUID> eventIds, boolean dryRun)
            throws IOException, TimeoutException, InterruptedException {
        return run(
                connection,
                Request.of(queue, dryRun ? Action.LIST : Action.REPLAY, Selection.events(eventIds)),
                handled -> {});
    }

    /**
     * Does the request's action with the dead letters it selects, one message at a time, each at most once: at most
     * the messages the dead-letter queue held when it started.
     *
     * @param each told of each dead letter selected, in queue order, once it is replayed, discarded or left
     */
    public Result run(Connection connection, Request request, Consumer<Handled> each)
            throws IOException, TimeoutException, InterruptedException {
        String queue = request.queue();
        String deadLetters = queue + ".dlq";
        Action action = request.action();
        try (Channel channel = connection.createChannel()) {
            requireQueue(connection, queue);
            requireQueue(connection, deadLetters);
            requireReplayExchange(connection, queue);
            int waiting = channel.queueDeclarePassive(deadLetters).getMessageCount();
            this.out.printf(
                    "%s holds %d message(s); %s %s%n",
                    deadLetters,
                    waiting,
                    switch (action) {
                        case LIST -> "would replay";
                        case REPLAY -> "replaying";
                        case DISCARD -> "discarding";
                    },
                    request.selection());
            channel.confirmSelect();
            int[] counts = new int[Outcome.values().length];
            int kept = 0;
            int selected = 0;
            int examined = 0;
            for (int taken = 0; taken < waiting; taken++) {
                GetResponse message = channel.basicGet(deadLetters, false);
                if (message == null) {
                    break;
                }
                Map<String, Object> headers = message.getProps().getHeaders() != null
                        ? message.getProps().getHeaders()
                        : Map.of();
                UUID eventId =
                        eventId(message.getBody(), headers, message.getProps().getMessageId());
                String cause = DeadLetterCause.of(headers);
                Handled handled =
                        selected < request.limit() && request.selection().selects(eventId, cause)
                                ? handle(message, eventId, cause, request)
                                : null;
                if (handled != null) {
                    selected++;
                } else {
                    kept++;
                }
                print(action, handled, describe(message, eventId));
                boolean done = handled != null
                        && action != Action.LIST
                        && (handled.outcome() == Outcome.REPLAYED || handled.outcome() == Outcome.DISCARDED);
                if (done && action == Action.DISCARD) {
                    channel.basicAck(message.getEnvelope().getDeliveryTag(), false);
                } else {
                    // What is not replayed goes to the back of its queue, unchanged, rather than back where it was: a
                    // return counts against a quorum queue's delivery limit (20 by default on RabbitMQ 4), past which
                    // a dead-letter queue, having no dead-letter exchange of its own, drops the message.
                    move(channel, message, replayExchange(queue), done ? queue : deadLetters, done);
                }
                // Told once it is done: a failure before leaves the dead letter where it was, and it is not counted.
                if (handled != null) {
                    counts[handled.outcome().ordinal()]++;
                    each.accept(handled);
                }
                examined++;
                if (action != Action.LIST && (taken + 1) % 100 == 0) {
                    this.out.printf("  %d of %d taken%n", taken + 1, waiting);
                }
            }
            Result result = new Result(
                    counts[Outcome.REPLAYED.ordinal()],
                    counts[Outcome.DISCARDED.ordinal()],
                    kept,
                    counts[Outcome.REFUSED.ordinal()],
                    counts[Outcome.SKIPPED.ordinal()],
                    waiting - examined);
            if (result.unexamined() > 0) {
                this.out.printf(
                        "%d message(s) of %s were not there to take (another reader held them): run it again%n",
                        result.unexamined(), deadLetters);
            }
            this.out.printf(
                    "%s %d message(s)%s; %d kept in %s, %d refused and %d skipped (left there)%n",
                    switch (action) {
                        case LIST -> "Would replay";
                        case REPLAY -> "Replayed";
                        case DISCARD -> "Discarded";
                    },
                    action == Action.DISCARD ? result.discarded() : result.replayed(),
                    action == Action.REPLAY ? " to " + queue : "",
                    kept,
                    deadLetters,
                    result.refused(),
                    result.skipped());
            return result;
        }
    }

    /**
     * Says what happened to a dead letter: in a list, each one (kept: not selected); otherwise those refused or
     * skipped, with the reason.
     */
    private void print(Action action, @Nullable Handled handled, String described) {
        if (action == Action.LIST) {
            String verb = handled == null
                    ? "keep"
                    : switch (handled.outcome()) {
                        case REFUSED -> "refuse";
                        case SKIPPED -> "skip";
                        default -> "replay";
                    };
            this.out.printf(
                    "  %-6s %s%s%n",
                    verb, described, handled != null && handled.reason() != null ? " (" + handled.reason() + ")" : "");
        } else if (handled != null && handled.reason() != null) {
            this.out.printf(
                    "  %s %s: %s%n", handled.outcome().name().toLowerCase(Locale.ROOT), described, handled.reason());
        }
    }

    /** What the action does with a dead letter it selected: refuses it, skips it, or replays or discards it. */
    private static Handled handle(GetResponse message, @Nullable UUID eventId, String cause, Request request) {
        if (request.action() == Action.DISCARD) {
            return new Handled(eventId, cause, Outcome.DISCARDED, null);
        }
        String refusal = refusal(message, eventId, request.queue());
        if (refusal != null) {
            return new Handled(eventId, cause, Outcome.REFUSED, refusal);
        }
        Verdict verdict = request.horizon().check(Objects.requireNonNull(eventId));
        return verdict != null
                ? new Handled(eventId, cause, verdict.outcome(), verdict.reason())
                : new Handled(eventId, cause, Outcome.REPLAYED, null);
    }

    /**
     * Why a dead letter cannot be replayed as it is, {@code null} when it can: it has no event id, a header the replay
     * reads and writes holds what it cannot read (whoever published the message wrote it, and dead-lettering kept it),
     * or the broker dead-lettered it, not the service.
     */
    private static @Nullable String refusal(GetResponse message, @Nullable UUID eventId, String queue) {
        if (eventId == null) {
            return "it carries no event id (no envelope, event_id or ce_id header, or message id) that the service could"
                    + " take it back by";
        }
        Map<String, Object> headers = message.getProps().getHeaders();
        Object count = headers != null ? headers.get(REPLAY_COUNT) : null;
        if (count != null && !(count instanceof Number)) {
            return "its %s header is not a number (%s)".formatted(REPLAY_COUNT, LogSafe.of(count.toString()));
        }
        String death = brokersDeath(headers, queue);
        if (death != null) {
            return ("the broker dead-lettered it from %s itself (%s), not the service, which takes back only what it"
                            + " dead-lettered; publish it again from its producer")
                    .formatted(queue, death);
        }
        return null;
    }

    /**
     * The reason the broker dead-lettered the message from the queue itself ({@code expired}, {@code maxlen},
     * {@code delivery_limit}): the newest death it recorded, {@code null} when the service dead-lettered it (the
     * binder republishes it, and the broker records no death).
     */
    private static @Nullable String brokersDeath(@Nullable Map<String, Object> headers, String queue) {
        if (headers != null
                && newestDeathOf(headers) instanceof Map<?, ?> newest
                && newest.get("queue") != null
                && queue.equals(newest.get("queue").toString())) {
            String reason = newestDeath(headers);
            return reason != null && BROKERS_DEATHS.contains(reason) ? reason : null;
        }
        return null;
    }

    /** The reason of the newest death the broker recorded on a message ({@code x-death}), {@code null} if none. */
    static @Nullable String newestDeath(Map<String, ?> headers) {
        return newestDeathOf(headers) instanceof Map<?, ?> newest && newest.get("reason") != null
                ? newest.get("reason").toString()
                : null;
    }

    /** When the broker last dead-lettered the message itself (its newest {@code x-death}), {@code null} if never. */
    static @Nullable Instant newestDeathTime(Map<String, ?> headers) {
        Object time = newestDeathOf(headers) instanceof Map<?, ?> newest ? newest.get("time") : null;
        // The client gives a Date; the management API's JSON, seconds.
        if (time instanceof Date date) {
            return date.toInstant();
        }
        return time instanceof Number seconds ? Instant.ofEpochSecond(seconds.longValue()) : null;
    }

    private static @Nullable Object newestDeathOf(Map<String, ?> headers) {
        return headers.get("x-death") instanceof List<?> deaths && !deaths.isEmpty() ? deaths.get(0) : null;
    }

    private static void requireQueue(Connection connection, String queue) throws IOException, TimeoutException {
        try (Channel probe = connection.createChannel()) {
            probe.queueDeclarePassive(queue);
        } catch (IOException ex) {
            throw new IllegalStateException(
                    "There is no queue '%s' on the broker: check the name (the service's queue, such as stock.events)"
                            .formatted(queue),
                    ex);
        }
    }

    private static void requireReplayExchange(Connection connection, String queue)
            throws IOException, TimeoutException {
        String exchange = replayExchange(queue);
        try (Channel probe = connection.createChannel()) {
            probe.exchangeDeclarePassive(exchange);
        } catch (IOException ex) {
            throw new IllegalStateException(
                    ("There is no exchange '%1$s' on the broker: declare it (a direct exchange, bound to %2$s with"
                                    + " routing key %2$s and to %2$s.dlq with routing key %2$s.dlq), and let the"
                                    + " replay user write to it alone, as infra/rabbitmq/definitions.json does")
                            .formatted(exchange, queue),
                    ex);
        }
    }

    /** The exchange dead letters of the queue are moved back through: {@code <queue>.replay}. */
    static String replayExchange(String queue) {
        return queue + ".replay";
    }

    private void move(Channel channel, GetResponse message, String exchange, String target, boolean replay)
            throws IOException, TimeoutException, InterruptedException {
        AMQP.BasicProperties properties = message.getProps();
        if (replay) {
            Map<String, Object> headers =
                    new HashMap<>(properties.getHeaders() != null ? properties.getHeaders() : Map.of());
            // A number: a dead letter whose count is not one is refused before it is moved (refusal).
            headers.merge(REPLAY_COUNT, 1, (count, one) -> ((Number) count).intValue() + 1);
            headers.put(REPLAYED_AT, Instant.now().toString());
            // The event's name, for a service that reads it from the headers, where the routing key it came by was
            // the name: recorded when it was dead-lettered. A dead letter replayed before has it already. The service
            // takes the message only as it recorded it when it dead-lettered it, name included.
            if (!headers.containsKey(EventHeaders.EVENT_NAME)) {
                String firstKey = RabbitDeadLetters.firstRoutingKey(headers);
                if (firstKey != null) {
                    headers.put(EventHeaders.EVENT_NAME, firstKey);
                }
            }
            properties = properties.builder().headers(headers).build();
        }
        // Mandatory: a message the exchange routes nowhere (a binding missing) comes back before its confirm, and the
        // dead letter is then left where it is, never acknowledged.
        AtomicBoolean returned = new AtomicBoolean();
        ReturnListener listener = channel.addReturnListener(back -> returned.set(true));
        try {
            channel.basicPublish(exchange, target, true, properties, message.getBody());
            channel.waitForConfirmsOrDie(CONFIRM_TIMEOUT_MS);
        } finally {
            channel.removeReturnListener(listener);
        }
        if (returned.get()) {
            throw new IllegalStateException(
                    ("The exchange '%1$s' routes nothing to %2$s: bind %2$s to it with routing key %2$s. The dead"
                                    + " letter stays in its queue")
                            .formatted(exchange, target));
        }
        channel.basicAck(message.getEnvelope().getDeliveryTag(), false);
    }

    /**
     * The event id of a dead letter, wherever the service read it: the envelope, or, around a bare payload, a header
     * ({@code event_id}, the header source's default, or CloudEvents' {@code ce_id} / {@code ce-id}) or the AMQP
     * message id. The envelope comes first: a header beside it is no id the guard claims (whoever published the
     * message set it, perhaps to the id of another dead letter).
     *
     * @param body its body
     * @param headers its headers
     * @param messageId its AMQP message id
     */
    public static @Nullable UUID eventId(byte[] body, Map<String, ?> headers, @Nullable String messageId) {
        try {
            return CODEC.read(body).eventId();
        } catch (RejectedMessageException ex) {
            if (ex.eventId() != null) {
                return ex.eventId();
            }
        }
        List<@Nullable Object> candidates = new ArrayList<>();
        ID_HEADERS.forEach(header -> candidates.add(headers.get(header)));
        candidates.add(messageId);
        for (Object candidate : candidates) {
            UUID eventId = candidate != null ? EnvelopeCodec.parseCanonicalUuid(candidate.toString()) : null;
            if (eventId != null) {
                return eventId;
            }
        }
        return null;
    }

    private static String describe(GetResponse message, @Nullable UUID eventId) {
        Object reason = message.getProps().getHeaders() != null
                ? message.getProps().getHeaders().get("x-exception-message")
                : null;
        // Written by whoever dead-lettered the message, or published it to the dead-letter queue: escaped and cut.
        return "%s: %s"
                .formatted(
                        eventId != null ? eventId : "(no event id)",
                        reason != null ? LogSafe.of(reason.toString()) : "");
    }
}
