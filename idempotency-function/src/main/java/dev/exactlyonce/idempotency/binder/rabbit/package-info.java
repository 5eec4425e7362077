/**
 * RabbitMQ's binder, where it is: consumer defaults and checks, listener containers, routes, give-backs, confirms.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.rabbit;

import org.jspecify.annotations.NullMarked;
