/**
 * The outage halt: outages and conflicts, holding and giving back deliveries, the probe, the wait at start-up.
 */
@NullMarked
package dev.exactlyonce.idempotency.outage;

import org.jspecify.annotations.NullMarked;
