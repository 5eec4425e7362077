/**
 * The outbox: {@link dev.exactlyonce.idempotency.outbox.Outbox}, its per-database statements, the relay that publishes
 * committed rows in each key's order, parked rows, the outbox's purge, health and endpoint.
 */
@NullMarked
package dev.exactlyonce.idempotency.outbox;

import org.jspecify.annotations.NullMarked;
