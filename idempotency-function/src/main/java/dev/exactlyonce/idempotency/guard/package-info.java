/**
 * The inbox: the {@code idempotencyGuard} function, reading and claiming an event, the transaction per message, the
 * business function's invocation, batches, key scopes, and how a guarded binding is installed on its binder.
 */
@NullMarked
package dev.exactlyonce.idempotency.guard;

import org.jspecify.annotations.NullMarked;
