package dev.exactlyonce.idempotency.jdbc;

import java.util.function.IntSupplier;

/**
 * A delete run in batches, each its own statement (and, in autocommit, its own transaction), until a batch deletes
 * fewer rows than it may: the purges of processed ids and of the outbox, so that neither holds a long transaction or
 * a lock on many rows.
 *
 * @param rows the rows deleted in all
 * @param batches the statements run
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
