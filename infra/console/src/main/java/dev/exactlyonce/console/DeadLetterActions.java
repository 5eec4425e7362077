package dev.exactlyonce.console;

import com.rabbitmq.client.Address;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.deadletters.DeadLetterReplay.Action;
import dev.exactlyonce.deadletters.DeadLetterReplay.Handled;
import dev.exactlyonce.deadletters.DeadLetterReplay.Horizon;
import dev.exactlyonce.deadletters.DeadLetterReplay.Outcome;
import dev.exactlyonce.deadletters.DeadLetterReplay.Selection;
import dev.exactlyonce.deadletters.DeadLetterReplay.Verdict;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.springframework.stereotype.Component;

/**
 * Replays, discards or lists the dead letters of a queue through AMQP, with the replay command's mechanism
 * ({@link DeadLetterReplay}) and every one of its checks, and one more that the command cannot make: the services' own
 * record of each dead letter (their {@code idempotency} endpoint), so that a dead letter past a service's replay
 * horizon is skipped, and one no service dead-lettered is refused, rather than sent to be dead-lettered again.
 */
@Component
class DeadLetterActions {

    /** The most messages whose outcome the page shows; the counts cover them all. */
    static final int SHOWN = 500;

    /**
     * What an action did, whole or up to a failure.
     *
     * @param result how many messages had each outcome; {@code null} when it failed part-way
     * @param handled each message selected that it was done with, in queue order (the first {@link #SHOWN})
     * @param done how many it replayed or discarded (all of them, where {@code handled} shows the first only)
     * @param failure why it stopped part-way; {@code null} when it went through
     */
    record Done(
            DeadLetterReplay.@Nullable Result result,
            List<Handled> handled,
            int done,
            @Nullable Exception failure) {}

    private final ConsoleProperties.@Nullable Broker broker;

    private final ServiceEndpoints services;

    private final Duration timeout;

    /** The services that consume each queue, as the settings name them. */
    private final Map<String, Set<String>> owners = new HashMap<>();

    DeadLetterActions(ConsoleProperties properties, ServiceEndpoints services) {
        this.broker = properties.broker();
        this.services = services;
        this.timeout = properties.timeout();
        properties
                .services()
                .forEach(service -> service.queues()
                        .forEach(queue -> this.owners
                                .computeIfAbsent(queue, any -> new HashSet<>())
                                .add(service.name())));
    }

    /** Whether the settings name a broker. */
    boolean configured() {
        return this.broker != null;
    }

    /**
     * Does the action with the dead letters of {@code <queue>.dlq} the selection takes, at most {@code limit} of them: a
     * replay skips or refuses, with the reason, each one the services would not take back. A failure part-way says
     * how far it went.
     */
    Done run(String queue, Action action, Selection selection, int limit) {
        ConsoleProperties.Broker broker = Objects.requireNonNull(this.broker, "no broker in the settings");
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUsername(broker.username());
        factory.setPassword(broker.password());
        factory.setVirtualHost(broker.virtualHost());
        factory.setConnectionTimeout((int) this.timeout.toMillis());
        factory.setAutomaticRecoveryEnabled(false);
        List<Handled> handled = new ArrayList<>();
        AtomicInteger done = new AtomicInteger();
        try (Connection connection = factory.newConnection(Address.parseAddresses(broker.amqpAddresses()), "console")) {
            DeadLetterReplay.Request request =
                    DeadLetterReplay.Request.of(queue, action, selection).withLimit(limit);
            if (action == Action.REPLAY) {
                request = request.withHorizon(horizon(queue));
            }
            DeadLetterReplay.Result result = new DeadLetterReplay(new PrintStream(new ByteArrayOutputStream()))
                    .run(connection, request, each -> {
                        if (handled.size() < SHOWN) {
                            handled.add(each);
                        }
                        if (each.outcome() == Outcome.REPLAYED || each.outcome() == Outcome.DISCARDED) {
                            done.incrementAndGet();
                        }
                    });
            return new Done(result, handled, done.get(), null);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return new Done(null, handled, done.get(), ex);
        } catch (IOException | TimeoutException | RuntimeException ex) {
            return new Done(null, handled, done.get(), ex);
        }
    }

    /**
     * The services' record of each dead letter, against each instance's dead-letter retention read now: those of the
     * services that consume the queue ({@code console.services[].queues}), or of every service when none says so.
     */
    private Horizon horizon(String queue) {
        Map<URI, Duration> retentions = this.services.instances().stream()
                .filter(instance -> instance.deadLetters() != null)
                .collect(Collectors.toMap(
                        ServiceEndpoints.Instance::url,
                        instance -> instance.deadLetters().retention(),
                        (a, b) -> a));
        Set<String> owners = this.owners.getOrDefault(queue, Set.of());
        return eventId -> verdict(
                this.services.lookup(eventId).stream()
                        .filter(lookup -> owners.isEmpty() || owners.contains(lookup.service()))
                        .toList(),
                retentions,
                Instant.now());
    }

    /**
     * Whether the services would take a replay of the event back: one of them recorded dead-lettering it, waiting,
     * within its retention. Else why not: past the retention, applied already, a service that did not answer (it may
     * hold the record: skipped, to be tried again), or recorded nowhere (refused: a message no service dead-lettered).
     */
    static @Nullable Verdict verdict(
            List<ServiceEndpoints.Lookup> lookups, Map<URI, Duration> retentions, Instant now) {
        String pastRetention = null;
        String appliedBefore = null;
        for (ServiceEndpoints.Lookup lookup : lookups) {
            Duration retention = retentions.get(lookup.url());
            for (ServiceEndpoints.DeadLetter record : lookup.deadLetters()) {
                Instant at = instant(record.deadLetteredAt());
                if (at == null || retention == null) {
                    return Verdict.skip("could not read when %s dead-lettered it (%s), or its retention: try again"
                            .formatted(lookup.service(), record.deadLetteredAt()));
                }
                if (record.takenBackAt() != null) {
                    appliedBefore = "%s applied a replay of it at %s: another does nothing"
                            .formatted(lookup.service(), record.takenBackAt());
                } else if (at.plus(retention).isBefore(now)) {
                    pastRetention = ("too old for the replay horizon: %s dead-lettered it at %s, longer ago than its"
                                    + " dead-letter retention (%s), and would refuse it")
                            .formatted(lookup.service(), record.deadLetteredAt(), retention);
                } else {
                    return null;
                }
            }
        }
        if (pastRetention != null) {
            return Verdict.skip(pastRetention);
        }
        if (appliedBefore != null) {
            return Verdict.skip(appliedBefore);
        }
        List<String> silent = lookups.stream()
                .filter(lookup -> lookup.unreachable() != null)
                .map(lookup -> "%s at %s (%s)".formatted(lookup.service(), lookup.url(), lookup.unreachable()))
                .toList();
        if (!silent.isEmpty()) {
            return Verdict.skip("not asked: " + String.join(", ", silent)
                    + " did not answer, and may hold its record; try again once it does");
        }
        return Verdict.refuse("no service recorded dead-lettering it: not a dead letter of theirs, or one dead-lettered"
                + " longer ago than their dead-letter retention");
    }

    private static @Nullable Instant instant(String text) {
        try {
            return Instant.parse(text);
        } catch (DateTimeParseException ex) {
            return null;
        }
    }

    /** The selection a form names: its event ids, else its cause; {@code null} when it names neither. */
    static @Nullable Selection selection(List<String> eventIds, @Nullable String cause) {
        if (!eventIds.isEmpty()) {
            return Selection.events(eventIds.stream().map(UUID::fromString).collect(Collectors.toSet()));
        }
        return cause != null && !cause.isBlank() ? Selection.cause(cause) : null;
    }
}
