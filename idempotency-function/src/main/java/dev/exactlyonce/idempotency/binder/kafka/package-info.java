/**
 * Kafka's binder, where it is: consumer defaults and checks, error handlers, routes, the relay's sends, dead letters.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.kafka;

import org.jspecify.annotations.NullMarked;
