/**
 * Retention of {@code processed_event}: the batched purge and the partitioned table's partitions, on a schedule, under
 * a session lock.
 */
@NullMarked
package dev.exactlyonce.idempotency.retention;

import org.jspecify.annotations.NullMarked;
