/**
 * The idempotency library's API: its properties ({@link IdempotencyProperties}, {@link OutboxProperties}), the
 * envelope's codec, the events a business function returns ({@link OutgoingEvent}), the exceptions, the outage
 * classifier a service may add, and the auto-configuration every other comes after (but the metrics').
 *
 * <p>A consuming service composes {@code idempotencyGuard|<businessFunction>} in
 * {@code spring.cloud.function.definition}; the packages below hold the parts: {@code guard} (the inbox),
 * {@code outage}, {@code outbox}, {@code retention}, {@code schema}, {@code observability}, and one package per binder
 * ({@code docs/design.md}, "The packages").
 */
@NullMarked
package dev.exactlyonce.idempotency;

import org.jspecify.annotations.NullMarked;
