/**
 * The outage halt: what counts as the database's outage or a conflict, holding and giving back deliveries, the probe,
 * pausing bindings, and waiting for the database at start-up.
 */
@NullMarked
package dev.exactlyonce.idempotency.outage;

import org.jspecify.annotations.NullMarked;
