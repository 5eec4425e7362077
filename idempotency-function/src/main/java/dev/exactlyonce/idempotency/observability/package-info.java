/** What the library shows: Micrometer meters, the {@code idempotency} Actuator endpoint and the outage's health. */
@NullMarked
package dev.exactlyonce.idempotency.observability;

import org.jspecify.annotations.NullMarked;
