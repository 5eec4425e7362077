/**
 * The idempotency library's API: its properties ({@link IdempotencyProperties}, {@link OutboxProperties}), the
 * envelope's codec, the events a business function returns ({@link OutgoingEvent}), the exceptions, the outage
 * classifier, and the auto-configuration the others come after. See docs/design.md, "The packages".
 */
@NullMarked
package dev.exactlyonce.idempotency;

import org.jspecify.annotations.NullMarked;
