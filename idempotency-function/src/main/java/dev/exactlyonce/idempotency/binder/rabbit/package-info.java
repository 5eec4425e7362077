/**
 * RabbitMQ's binder: the consumer defaults and checks of a guarded binding, its listener containers, the routing key a
 * message was published with, the give-back of a delivery, and the publisher confirms of the outbox relay. Registered
 * by its own auto-configuration where the binder is; used for the bindings and destinations of that binder.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.rabbit;

import org.jspecify.annotations.NullMarked;
