/**
 * RabbitMQ's binder, where it is: a guarded binding's consumer defaults and checks, its listener containers, the
 * routing key a message was published with, the give-back of a delivery, and the relay's publisher confirms.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.rabbit;

import org.jspecify.annotations.NullMarked;
