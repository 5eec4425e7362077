package dev.exactlyonce.idempotency.jdbc;

import java.util.function.IntSupplier;

/**
 * A delete run in batches, each its own statement (in autocommit, its own transaction), until one falls short: a purge
 * then never holds a long transaction or locks many rows.
 */
public record BatchedDelete(long rows, int batches) {

    public static BatchedDelete run(int batchSize, IntSupplier batch) {
        long rows = 0;
        int batches = 0;
        int deleted;
        do {
            deleted = batch.getAsInt();
            rows += deleted;
            batches++;
        } while (deleted == batchSize);
        return new BatchedDelete(rows, batches);
    }
}
