package dev.exactlyonce.infra;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The replay command on a real RabbitMQ: a queue and its dead-letter queue, as the Rabbit binder declares them. */
class DeadLetterReplayIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final Connection connection = rabbit.newConnection();

    private final ByteArrayOutputStream output = new ByteArrayOutputStream();

    private final DeadLetterReplay replay = new DeadLetterReplay(new PrintStream(this.output, true, UTF_8));

    private String queue;

    @BeforeEach
    void declareQueues() throws Exception {
        this.queue = rabbit.uniqueName("replay." + UUID.randomUUID().toString().substring(0, 8));
        try (Channel channel = connection.createChannel()) {
            Map<String, Object> quorum = Map.of("x-queue-type", "quorum");
            channel.queueDeclare(this.queue, true, false, false, quorum);
            channel.queueDeclare(this.queue + ".dlq", true, false, false, quorum);
        }
        ReplayExchanges.declareAndBind(rabbit, this.queue);
    }

    private void redeclareQueues(String type) throws Exception {
        try (Channel channel = connection.createChannel()) {
            Map<String, Object> arguments = Map.of("x-queue-type", type);
            channel.queueDelete(this.queue);
            channel.queueDelete(this.queue + ".dlq");
            channel.queueDeclare(this.queue, true, false, false, arguments);
            channel.queueDeclare(this.queue + ".dlq", true, false, false, arguments);
        }
        ReplayExchanges.declareAndBind(rabbit, this.queue);
    }

    @AfterAll
    static void close() throws Exception {
        connection.close();
    }

    @Test
    void movesEveryDeadLetterBackToItsQueueWithItsHeaders() throws Exception {
        List<UUID> events = List.of(UUID.randomUUID(), UUID.randomUUID(), UUID.randomUUID());
        for (UUID event : events) {
            deadLetter(event);
        }

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(3, 0, 0, 0, 0, 0));
        List<GetResponse> replayed = drain(this.queue);
        assertThat(replayed).extracting(response -> envelopeId(response)).containsExactlyElementsOf(events);
        assertThat(replayed).allSatisfy(response -> {
            assertThat(response.getProps().getHeaders())
                    .containsEntry(DeadLetterReplay.REPLAY_COUNT, 1)
                    .containsKey(DeadLetterReplay.REPLAYED_AT);
            assertThat(response.getProps().getHeaders().get("x-exception-message"))
                    .hasToString("INVALID_PAYLOAD: test");
            assertThat(response.getProps().getContentType()).isEqualTo("application/json");
        });
        assertThat(drain(this.queue + ".dlq")).isEmpty();
        assertThat(this.output.toString(UTF_8)).contains("Replayed 3 message(s) to " + this.queue);
    }

    @Test
    void replaysOnlyTheSelectedEventsAndKeepsTheOthers() throws Exception {
        UUID selected = UUID.randomUUID();
        UUID other = UUID.randomUUID();
        deadLetter(other);
        deadLetter(selected);
        deadLetterBody("not an envelope".getBytes(UTF_8));

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(selected), false);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 2, 0, 0, 0));
        assertThat(drain(this.queue))
                .extracting(response -> envelopeId(response))
                .containsExactly(selected);
        List<GetResponse> kept = drain(this.queue + ".dlq");
        assertThat(kept).hasSize(2);
        assertThat(kept.get(0).getProps().getHeaders()).doesNotContainKey(DeadLetterReplay.REPLAY_COUNT);
    }

    @Test
    void aDryRunListsAndMovesNothing() throws Exception {
        UUID event = UUID.randomUUID();
        deadLetter(event);

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(), true);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 0, 0, 0, 0));
        assertThat(this.output.toString(UTF_8)).contains("replay " + event + ": INVALID_PAYLOAD: test");
        assertThat(drain(this.queue)).isEmpty();
        assertThat(drain(this.queue + ".dlq")).hasSize(1);
    }

    @Test
    void aDryRunPrintsADeadLettersReasonEscapedAndCut() throws Exception {
        UUID event = UUID.randomUUID();
        // Written by whoever published the dead letter: a terminal escape that clears the screen, a line forged after
        // a line break, and a reason as long as a message.
        String reason = "INVALID_PAYLOAD: \u001b[2J\nreplay " + UUID.randomUUID() + ": fine" + "x".repeat(10_000);
        deadLetterBody("""
                {"event_id": "%s", "event_name": "order.order.placed.v1", "payload": {}}""".formatted(event).getBytes(UTF_8), Map.of("x-exception-message", reason));

        this.replay.replay(connection, this.queue, Set.of(), true);

        String printed = this.output.toString(UTF_8);
        assertThat(printed).doesNotContain("\u001b").contains("\\u001b[2J\\u000areplay ");
        assertThat(printed.lines()).noneMatch(line -> line.startsWith("replay "));
        assertThat(printed.lines().filter(line -> line.startsWith("  replay"))).hasSize(1);
        assertThat(printed.lines().mapToInt(String::length).max().orElseThrow()).isLessThan(400);
    }

    @ParameterizedTest(name = "{0} queues")
    @ValueSource(strings = {"quorum", "classic"})
    void aDryRunListsEachDeadLetterOnceInOrderAndLeavesThemInOrder(String queueType) throws Exception {
        redeclareQueues(queueType);
        List<UUID> events = List.of(UUID.randomUUID(), UUID.randomUUID(), UUID.randomUUID(), UUID.randomUUID());
        for (UUID event : events) {
            deadLetter(event);
        }

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(events.get(1)), true);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 3, 0, 0, 0));
        assertThat(this.output.toString(UTF_8).lines().filter(line -> line.startsWith("  ")))
                .containsExactly(
                        "  keep   " + events.get(0) + ": INVALID_PAYLOAD: test",
                        "  replay " + events.get(1) + ": INVALID_PAYLOAD: test",
                        "  keep   " + events.get(2) + ": INVALID_PAYLOAD: test",
                        "  keep   " + events.get(3) + ": INVALID_PAYLOAD: test");
        assertThat(drain(this.queue)).isEmpty();
        assertThat(drain(this.queue + ".dlq"))
                .extracting(response -> envelopeId(response))
                .containsExactlyElementsOf(events);
    }

    /**
     * A quorum queue counts each return of a message against its delivery limit (20 by default on RabbitMQ 4), and
     * drops the message past it when it has no dead-letter exchange of its own, as a dead-letter queue has none: dry
     * runs that handed the dead letters back would lose them all on the 21st.
     */
    @Test
    void dryRunsRepeatedPastAQuorumQueuesDeliveryLimitLoseNoDeadLetter() throws Exception {
        List<UUID> events = List.of(UUID.randomUUID(), UUID.randomUUID());
        for (UUID event : events) {
            deadLetter(event);
        }

        for (int run = 0; run < 25; run++) {
            assertThat(this.replay.replay(connection, this.queue, Set.of(), true))
                    .as("dry run %d", run + 1)
                    .isEqualTo(new DeadLetterReplay.Result(2, 0, 0, 0, 0, 0));
        }

        assertThat(drain(this.queue + ".dlq"))
                .extracting(response -> envelopeId(response))
                .containsExactlyElementsOf(events);
    }

    @Test
    void aReplayedMessageCarriesTheNameOfItsEventFromTheRoutingKeyItWasPublishedWith() throws Exception {
        // Bare payloads, their ids in a header: a dead letter with no event id at all is refused (its own test).
        deadLetterBody(
                "{}".getBytes(UTF_8),
                Map.of(
                        EventHeaders.EVENT_ID,
                        UUID.randomUUID().toString(),
                        "x-original-exchange",
                        "events",
                        "x-original-routingKey",
                        "order.order.placed.v1"));
        deadLetterBody(
                "{}".getBytes(UTF_8),
                Map.of(
                        EventHeaders.EVENT_ID,
                        UUID.randomUUID().toString(),
                        "x-death",
                        List.of(
                                Map.of("exchange", "", "routing-keys", List.of(this.queue)),
                                Map.of(
                                        "exchange",
                                        "events",
                                        "routing-keys",
                                        List.of("order.order.status-changed.v1")))));

        this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(drain(this.queue))
                .extracting(response -> response.getProps()
                        .getHeaders()
                        .get(EventHeaders.EVENT_NAME)
                        .toString())
                .containsExactly("order.order.placed.v1", "order.order.status-changed.v1");
    }

    /**
     * A dead letter that carries no event id anywhere the service reads one (no envelope, no id header, no message id)
     * is refused and left in the dead-letter queue: the service could not take it back, and would dead-letter it again.
     */
    @Test
    void aDeadLetterWithNoEventIdIsRefusedAndLeftWhereItIs() throws Exception {
        deadLetterBody("<html>not an event</html>".getBytes(UTF_8), Map.of());
        deadLetter(UUID.randomUUID());

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 0, 1, 0, 0));
        assertThat(this.output.toString(UTF_8)).contains("refused (no event id)", "carries no event id");
        assertThat(drain(this.queue + ".dlq"))
                .singleElement()
                .satisfies(left -> assertThat(left.getBody()).asString(UTF_8).isEqualTo("<html>not an event</html>"));
    }

    @Test
    void deadLettersOfAServiceThatReadsTheEventIdFromAHeaderAreSelectedByItAndKeepTheirEventsName() throws Exception {
        UUID selected = UUID.randomUUID();
        UUID other = UUID.randomUUID();
        UUID cloudEvent = UUID.randomUUID();
        // The bare payload, the id in a header (idempotency.event-id.source=header, or CloudEvents' binary mode), the
        // event's name in the routing key it was published with, recorded by the broker when it dead-lettered it.
        for (UUID eventId : List.of(other, selected)) {
            deadLetterBody(
                    "{}".getBytes(UTF_8),
                    Map.of(
                            EventHeaders.EVENT_ID,
                            eventId.toString(),
                            "x-original-exchange",
                            "events",
                            "x-original-routingKey",
                            "order.order.placed.v1"));
        }
        deadLetterBody(
                "{}".getBytes(UTF_8), Map.of("ce_id", cloudEvent.toString(), "ce_type", "order.order.placed.v1"));

        DeadLetterReplay.Result listed = this.replay.replay(connection, this.queue, Set.of(selected), true);
        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(selected), false);

        assertThat(listed).isEqualTo(new DeadLetterReplay.Result(1, 0, 2, 0, 0, 0));
        assertThat(this.output.toString(UTF_8).lines().filter(line -> line.startsWith("  ")))
                .containsExactly(
                        "  keep   " + other + ": INVALID_PAYLOAD: test",
                        "  replay " + selected + ": INVALID_PAYLOAD: test",
                        "  keep   " + cloudEvent + ": INVALID_PAYLOAD: test");
        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 2, 0, 0, 0));
        assertThat(drain(this.queue))
                .singleElement()
                .satisfies(replayed -> assertThat(replayed.getProps().getHeaders())
                        .hasEntrySatisfying(
                                EventHeaders.EVENT_ID, id -> assertThat(id).hasToString(selected.toString()))
                        .hasEntrySatisfying(
                                EventHeaders.EVENT_NAME,
                                name -> assertThat(name).hasToString("order.order.placed.v1")));
        assertThat(drain(this.queue + ".dlq")).hasSize(2);
    }

    @ParameterizedTest(name = "{0} queues")
    @ValueSource(strings = {"quorum", "classic"})
    void aReplayStartedAsSoonAsADryRunEndsFindsEveryMessageTheDryRunListed(String queueType) throws Exception {
        redeclareQueues(queueType);
        // A quorum queue applies a return asynchronously; one round in about twenty found none of them ready.
        for (int round = 0; round < 50; round++) {
            deadLetter(UUID.randomUUID());
            deadLetter(UUID.randomUUID());

            DeadLetterReplay.Result listed = this.replay.replay(connection, this.queue, Set.of(), true);
            DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(), false);

            assertThat(result)
                    .as("round %d", round)
                    .isEqualTo(listed)
                    .isEqualTo(new DeadLetterReplay.Result(2, 0, 0, 0, 0, 0));
            assertThat(drain(this.queue)).as("round %d", round).hasSize(2);
        }
    }

    @Test
    void aReplayedMessageCountsItsReplays() throws Exception {
        deadLetter(UUID.randomUUID());
        this.replay.replay(connection, this.queue, Set.of(), false);
        GetResponse once = drain(this.queue).get(0);
        publishConfirmed(this.queue + ".dlq", once.getProps(), once.getBody());

        this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(drain(this.queue).get(0).getProps().getHeaders()).containsEntry(DeadLetterReplay.REPLAY_COUNT, 2);
    }

    /**
     * A dead letter whose {@code x-replay-count} is not a number (whoever published the message wrote it, and the
     * broker kept it through dead-lettering) is refused, counted and kept in the dead-letter queue; the replay goes on
     * with the next one. Before, it stopped every replay of the queue.
     */
    @Test
    void aDeadLetterWithAReplayCountThatIsNoNumberIsRefusedAndTheOthersAreReplayed() throws Exception {
        UUID forged = UUID.randomUUID();
        UUID valid = UUID.randomUUID();
        deadLetterBody("""
                {"event_id": "%s", "event_name": "order.order.placed.v1", "payload": {}}""".formatted(forged).getBytes(UTF_8), Map.of(DeadLetterReplay.REPLAY_COUNT, "x"));
        deadLetter(valid);

        DeadLetterReplay.Result result = this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(result).isEqualTo(new DeadLetterReplay.Result(1, 0, 0, 1, 0, 0));
        assertThat(drain(this.queue))
                .singleElement()
                .satisfies(message ->
                        assertThat(new String(message.getBody(), UTF_8)).contains(valid.toString()));
        assertThat(drain(this.queue + ".dlq"))
                .singleElement()
                .satisfies(message ->
                        assertThat(new String(message.getBody(), UTF_8)).contains(forged.toString()));
        assertThat(this.output.toString(UTF_8)).contains("refused " + forged).contains("x-replay-count");
    }

    /**
     * A message the broker dead-lettered itself (it expired in the queue) never reached the service, whatever headers
     * its publisher gave it: refused, counted and kept. A selection goes by the envelope's id, not by an
     * {@code event_id} header a publisher set to the id of a genuine dead letter.
     */
    @Test
    void deadLettersTheBrokerDeadLetteredItselfAreRefusedAndTheSelectionGoesByTheEnvelopesId() throws Exception {
        UUID genuine = UUID.randomUUID();
        UUID expired = UUID.randomUUID();
        UUID impostor = UUID.randomUUID();
        deadLetter(genuine);
        deadLetterBody(
                envelope(expired),
                Map.of(
                        "x-original-exchange", "events",
                        "x-original-routingKey", "order.order.placed.v1",
                        "x-death", List.of(Map.of("queue", this.queue, "reason", "expired", "count", 1L))));
        deadLetterBody(envelope(impostor), Map.of("event_id", genuine.toString()));

        DeadLetterReplay.Result selected = this.replay.replay(connection, this.queue, Set.of(genuine), false);
        DeadLetterReplay.Result all = this.replay.replay(connection, this.queue, Set.of(), false);

        assertThat(selected).isEqualTo(new DeadLetterReplay.Result(1, 0, 2, 0, 0, 0));
        assertThat(all).isEqualTo(new DeadLetterReplay.Result(1, 0, 0, 1, 0, 0));
        assertThat(drain(this.queue)).extracting(DeadLetterReplayIT::envelopeId).containsExactly(genuine, impostor);
        assertThat(drain(this.queue + ".dlq"))
                .extracting(DeadLetterReplayIT::envelopeId)
                .containsExactly(expired);
        assertThat(this.output.toString(UTF_8)).contains("refused " + expired).contains("(expired)");
    }

    private static byte[] envelope(UUID eventId) {
        return """
                {"event_id": "%s", "event_name": "order.order.placed.v1", "payload": {}}""".formatted(eventId).getBytes(UTF_8);
    }

    /**
     * The command connects as the user allowed to move dead letters, which the operator names: without credentials it
     * refuses to run, rather than connect as {@code guest}, an administrator of a fresh broker.
     */
    @Test
    void theCommandRefusesToRunWithoutTheBrokerUsersCredentials() {
        ByteArrayOutputStream errors = new ByteArrayOutputStream();

        int status = Infra.run(
                new String[] {"replay-dead-letters", "stock.events"},
                Map.of("SPRING_RABBITMQ_PORT", Integer.toString(rabbit.port())),
                new PrintStream(this.output, true, UTF_8),
                new PrintStream(errors, true, UTF_8));

        assertThat(status).isEqualTo(2);
        assertThat(errors.toString(UTF_8))
                .startsWith("replay-dead-letters connects as the broker user that may move dead letters")
                .contains("SPRING_RABBITMQ_USERNAME");
        assertThat(this.output.toString(UTF_8)).doesNotContain("guest");
    }

    @Test
    void theCommandLineSaysWhatIsWrongWithItsArguments() {
        ByteArrayOutputStream errors = new ByteArrayOutputStream();

        int status = Infra.run(
                new String[] {"replay-dead-letters", "stock.events", "--event-id", "42"},
                new PrintStream(this.output, true, UTF_8),
                new PrintStream(errors, true, UTF_8));

        assertThat(status).isEqualTo(2);
        assertThat(errors.toString(UTF_8)).startsWith("'42' is not an event id (a UUID).");
    }

    private void deadLetter(UUID eventId) throws Exception {
        deadLetterBody("""
                {"event_id": "%s", "event_name": "order.order.placed.v1", "payload": {}}""".formatted(eventId).getBytes(UTF_8));
    }

    private void deadLetterBody(byte[] body) throws Exception {
        deadLetterBody(body, Map.of());
    }

    private void deadLetterBody(byte[] body, Map<String, Object> headers) throws Exception {
        Map<String, Object> all = new HashMap<>(Map.of("x-exception-message", "INVALID_PAYLOAD: test"));
        all.putAll(headers);
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .contentType("application/json")
                .deliveryMode(2)
                .headers(all)
                .build();
        publishConfirmed(this.queue + ".dlq", properties, body);
    }

    /**
     * Publishes and waits for the broker's confirm: without it, a quorum queue may not count the message yet when the
     * replay reads how many messages its dead-letter queue holds.
     */
    private static void publishConfirmed(String queue, AMQP.BasicProperties properties, byte[] body) throws Exception {
        try (Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish("", queue, properties, body);
            channel.waitForConfirmsOrDie(5_000);
        }
    }

    private static List<GetResponse> drain(String queue) throws Exception {
        List<GetResponse> messages = new ArrayList<>();
        try (Channel channel = connection.createChannel()) {
            for (GetResponse response = channel.basicGet(queue, true);
                    response != null;
                    response = channel.basicGet(queue, true)) {
                messages.add(response);
            }
        }
        return messages;
    }

    private static UUID envelopeId(GetResponse response) {
        String body = new String(response.getBody(), UTF_8);
        return UUID.fromString(
                body.substring(body.indexOf("\"event_id\": \"") + 13, body.indexOf("\"event_id\": \"") + 49));
    }
}
