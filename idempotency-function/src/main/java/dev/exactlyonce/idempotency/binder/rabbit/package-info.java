/**
 * RabbitMQ's binder: the consumer defaults and checks of a guarded binding, its listener containers, and the publisher confirms the outbox relay needs.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.rabbit;

import org.jspecify.annotations.NullMarked;
