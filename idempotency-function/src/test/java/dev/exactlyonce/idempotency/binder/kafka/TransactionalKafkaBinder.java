package dev.exactlyonce.idempotency.binder.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.regex.Pattern;
import org.springframework.boot.test.system.CapturedOutput;

/** What the tests on a transactional Kafka binder share. */
final class TransactionalKafkaBinder {

    /** The transactional producer's serializers, which write its dead letters. */
    static final String SERIALIZER = "dev.exactlyonce.idempotency.binder.kafka.DeadLetterSerializer";

    private static final Pattern LOG_LINE = Pattern.compile("\\d{4}-\\d{2}-\\d{2}T");

    private TransactionalKafkaBinder() {}

    /**
     * The container logs each rolled-back transaction, with its exception: a give-back's is one line, its reason, and
     * no stack trace follows it.
     */
    static void assertGiveBacksLoggedWithoutStackTraces(CapturedOutput output) {
        List<String> lines = output.getAll().lines().toList();
        int rolledBack = 0;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains("Transaction rolled back")) {
                rolledBack++;
                // What the line logs, up to the next line of the log (each starts with its date).
                List<String> logged = lines.subList(i + 1, lines.size()).stream()
                        .takeWhile(line -> !LOG_LINE.matcher(line).lookingAt())
                        .toList();
                assertThat(logged)
                        .as("what the rolled-back transaction's line logs, at line %d", i)
                        .anyMatch(line -> line.contains("given back to be delivered again"))
                        .noneMatch(line -> line.startsWith("\tat ") || line.startsWith("Caused by"));
            }
        }
        assertThat(rolledBack).as("rolled-back transactions logged").isPositive();
    }
}
