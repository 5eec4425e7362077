package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * The messages of a batch that failed, by index, while the others were processed: each goes to the dead-letter queue
 * alone ({@link FailedBatchSplitter}), with its own reason, and is not retried with the batch.
 */
final class PartlyFailedBatch extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    private final transient Map<Integer, Throwable> failures;

    PartlyFailedBatch(String bindingName, int batchSize, Map<Integer, ? extends Throwable> failures) {
        super(("%d of the %d messages of a batch of %s failed and go to the dead-letter queue alone; the others were"
                        + " processed: %s")
                .formatted(
                        failures.size(),
                        batchSize,
                        bindingName,
                        failures.entrySet().stream()
                                .map(failure -> "#" + failure.getKey() + " "
                                        + failure.getValue().getMessage())
                                .collect(Collectors.joining("; "))));
        this.failures = new TreeMap<>(failures);
    }

    Map<Integer, Throwable> failures() {
        return this.failures;
    }
}
