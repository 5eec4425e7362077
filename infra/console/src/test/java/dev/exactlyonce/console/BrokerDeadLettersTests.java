package dev.exactlyonce.console;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import tools.jackson.databind.json.JsonMapper;

/**
 * Which dead-letter queues the console reads: a read puts each message back, a return that a quorum queue counts
 * against its delivery limit, so a quorum queue is read only when neither its argument nor its policy limits it.
 */
class BrokerDeadLettersTests {

    private static final JsonMapper json = JsonMapper.builder().build();

    @ParameterizedTest
    @CsvSource(
            delimiter = '|',
            value = {
                "{\"type\":\"classic\"}                                                                      | read",
                "{\"type\":\"quorum\"}                                                                       | 20",
                "{\"type\":\"quorum\",\"arguments\":{\"x-delivery-limit\":5}}                                | 5",
                "{\"type\":\"quorum\",\"effective_policy_definition\":{\"delivery-limit\":-1}}               | read",
                "{\"type\":\"quorum\",\"arguments\":{\"x-delivery-limit\":5},"
                        + "\"effective_policy_definition\":{\"delivery-limit\":-1}}                         | 5",
                "{\"type\":\"quorum\",\"arguments\":{\"x-delivery-limit\":-1},"
                        + "\"effective_policy_definition\":{\"delivery-limit\":-1}}                         | read",
                "{\"type\":\"stream\"}                                                                       | stream"
            })
    void aQueueIsReadOnlyWhereAReadCountsAgainstNoLimit(String queue, String expected) {
        String notRead = BrokerDeadLetters.unreadable(json.readTree(queue));

        switch (expected) {
            case "read" -> assertThat(notRead).isNull();
            case "stream" -> assertThat(notRead).startsWith("a stream");
            default -> assertThat(notRead).startsWith("a quorum queue with a delivery limit of " + expected + ":");
        }
    }
}
