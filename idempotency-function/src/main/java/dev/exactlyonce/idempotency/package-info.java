/**
 * The idempotency guard: the {@code idempotencyGuard} function, its configuration and its transaction.
 *
 * <p>A consuming service composes {@code idempotencyGuard|<businessFunction>} in
 * {@code spring.cloud.function.definition}. For every message of that binding the library opens one database
 * transaction, the guard claims the event id in {@code processed_event}, the business function runs only on the
 * first delivery, and the transaction commits before the binder acknowledges the message.
 */
@NullMarked
package dev.exactlyonce.idempotency;

import org.jspecify.annotations.NullMarked;
