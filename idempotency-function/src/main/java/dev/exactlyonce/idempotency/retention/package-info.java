/**
 * Retention of {@code processed_event}: the batched purge or the daily partitions, on a schedule, under a session lock.
 */
@NullMarked
package dev.exactlyonce.idempotency.retention;

import org.jspecify.annotations.NullMarked;
