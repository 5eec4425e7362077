package dev.exactlyonce.infra;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.ReturnListener;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.Printable;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.binder.rabbit.RabbitDeadLetters;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import java.io.IOException;
import java.io.PrintStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * Moves dead letters back to their queue: the messages of {@code <queue>.dlq}, all of them or those of the given
 * event ids, are published to {@code <queue>} itself, with their headers and a count of replays, through the queue's
 * replay exchange, {@code <queue>.replay}: a direct exchange bound to the queue and to its dead-letter queue by their
 * names, and to nothing else (the broker's definitions declare it). The replay user writes to the replay exchanges
 * only: through the default exchange, which delivers to any queue by its name, it could put any message into any
 * queue of the virtual host.
 *
 * <p>Safe to run at any time, and again:
 *
 * <ol>
 *   <li>it takes at most the messages the dead-letter queue held when it started, one at a time;
 *   <li>a selected message is published with publisher confirms, then acknowledged in the dead-letter queue: a crash
 *       in between leaves a copy in both queues, which the service's guard discards;
 *   <li>a message that is not selected is published back to the tail of the dead-letter queue, then acknowledged
 *       (rather than rejected with requeue, which on a quorum queue counts against its delivery limit);
 *   <li>a replayed message keeps the name of its event: it goes to its queue through the replay exchange, whose
 *       routing key is the queue's name, so it carries an {@code event_name} header with the routing key it was
 *       published with (recorded when it was dead-lettered), for services that read the name from headers and for
 *       the next time it is dead-lettered. The service takes it back only if it dead-lettered that event, with that
 *       body, itself: no header vouches for a route;
 *   <li>a dead letter the broker dead-lettered itself (expired, over a length limit, past its delivery limit) was not
 *       dead-lettered by the service, which would refuse it: it is refused, counted, and left in the dead-letter queue;
 *   <li>replaying an event the service already applied has no effect: the guard finds its id.
 * </ol>
 *
 * <p>A dry run takes every dead letter without acknowledging it, lists each once in queue order, then returns them
 * all with one {@code basic.nack} (requeue), which does not count as a failed delivery against a quorum queue's
 * delivery limit (RabbitMQ 4.3 and later count {@code basic.reject} only).
 */
final class DeadLetterReplay {

    static final String REPLAY_COUNT = "x-replay-count";

    static final String REPLAYED_AT = "x-replayed-at";

    private static final long CONFIRM_TIMEOUT_MS = 10_000;

    /** The reasons the broker dead-letters a message of a queue for, on its own. */
    private static final Set<String> BROKERS_DEATHS = Set.of("expired", "maxlen", "delivery_limit");

    /** The headers a service may read the event id from: the header source's default, and CloudEvents' id. */
    private static final List<String> ID_HEADERS = List.of(EventHeaders.EVENT_ID, "ce_id", "ce-id");

    private final EnvelopeCodec codec = new EnvelopeCodec();

    private final PrintStream out;

    DeadLetterReplay(PrintStream out) {
        this.out = out;
    }

    /**
     * What a replay did.
     *
     * @param replayed the dead letters moved back to the queue
     * @param kept the dead letters not selected, left in the dead-letter queue
     * @param refused the dead letters selected that cannot be replayed as they are, left in the dead-letter queue
     */
    record Result(int replayed, int kept, int refused) {}

    /**
     * Replays the dead letters of {@code queue}: all of them when {@code eventIds} is empty.
     *
     * @param dryRun list what would be replayed, and replay nothing (each dead letter listed goes to the back of its
     *     queue, unchanged)
     */
    Result replay(Connection connection, String queue, Set<UUID> eventIds, boolean dryRun)
            throws IOException, TimeoutException, InterruptedException {
        String deadLetters = queue + ".dlq";
        try (Channel channel = connection.createChannel()) {
            requireQueue(connection, queue);
            requireQueue(connection, deadLetters);
            requireReplayExchange(connection, queue);
            int waiting = channel.queueDeclarePassive(deadLetters).getMessageCount();
            this.out.printf(
                    "%s holds %d message(s); %s%s%n",
                    deadLetters,
                    waiting,
                    dryRun ? "would replay " : "replaying ",
                    eventIds.isEmpty() ? "all" : "event(s) " + eventIds);
            channel.confirmSelect();
            int replayed = 0;
            int kept = 0;
            int refused = 0;
            for (int taken = 0; taken < waiting; taken++) {
                GetResponse message = channel.basicGet(deadLetters, false);
                if (message == null) {
                    break;
                }
                boolean selected = isSelected(message, eventIds);
                String refusal = selected ? refusal(message, queue) : null;
                if (refusal != null) {
                    this.out.printf(
                            dryRun ? "  refuse %s (%s)%n" : "  refused %s: %s%n",
                            describe(message, eventId(message)),
                            refusal);
                    refused++;
                } else if (selected) {
                    replayed++;
                } else {
                    kept++;
                }
                if (dryRun && refusal == null) {
                    this.out.printf("  %s %s%n", selected ? "replay" : "keep  ", describe(message, eventId(message)));
                }
                // A dry run moves each one to the back of its queue, unchanged, rather than hand it back: a return
                // counts against a quorum queue's delivery limit (20 by default on RabbitMQ 4), past which a
                // dead-letter
                // queue, having no dead-letter exchange of its own, drops the message.
                boolean replay = selected && refusal == null && !dryRun;
                move(channel, message, replayExchange(queue), replay ? queue : deadLetters, replay);
                if (!dryRun && (taken + 1) % 100 == 0) {
                    this.out.printf(
                            "  %d of %d: %d replayed, %d kept, %d refused%n",
                            taken + 1, waiting, replayed, kept, refused);
                }
            }
            if (dryRun) {
                this.out.printf(
                        "Would replay %d message(s); %d kept in %s, and %d refused%n",
                        replayed, kept, deadLetters, refused);
            } else {
                this.out.printf(
                        "Replayed %d message(s) to %s; %d kept in %s, and %d refused (left there)%n",
                        replayed, queue, kept, deadLetters, refused);
            }
            return new Result(replayed, kept, refused);
        }
    }

    /**
     * Why a dead letter cannot be replayed as it is, {@code null} when it can: a header the replay reads and writes
     * holds what it cannot read (whoever published the message wrote it, and dead-lettering kept it).
     */
    private static @Nullable String refusal(GetResponse message, String queue) {
        Map<String, Object> headers = message.getProps().getHeaders();
        Object count = headers != null ? headers.get(REPLAY_COUNT) : null;
        if (count != null && !(count instanceof Number)) {
            return "its %s header is not a number (%s)".formatted(REPLAY_COUNT, Printable.of(count.toString()));
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
                && headers.get("x-death") instanceof List<?> deaths
                && !deaths.isEmpty()
                && deaths.get(0) instanceof Map<?, ?> newest
                && newest.get("queue") != null
                && queue.equals(newest.get("queue").toString())
                && newest.get("reason") != null) {
            String reason = newest.get("reason").toString();
            return BROKERS_DEATHS.contains(reason) ? reason : null;
        }
        return null;
    }

    private boolean isSelected(GetResponse message, Set<UUID> eventIds) {
        UUID eventId = eventId(message);
        return eventIds.isEmpty() || (eventId != null && eventIds.contains(eventId));
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
     */
    private @Nullable UUID eventId(GetResponse message) {
        try {
            return this.codec.read(message.getBody()).eventId();
        } catch (RejectedMessageException ex) {
            if (ex.eventId() != null) {
                return ex.eventId();
            }
        }
        List<@Nullable Object> candidates = new ArrayList<>();
        Map<String, Object> headers = message.getProps().getHeaders();
        if (headers != null) {
            ID_HEADERS.forEach(header -> candidates.add(headers.get(header)));
        }
        candidates.add(message.getProps().getMessageId());
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
                        reason != null ? Printable.of(reason.toString()) : "");
    }
}
