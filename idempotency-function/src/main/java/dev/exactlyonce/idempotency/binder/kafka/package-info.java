/**
 * Kafka's binder: the consumer defaults and checks of a guarded binding, its error handlers, the topic a record came
 * from, the relay's sends keyed by the row's key that wait for the broker's acknowledgement, and the dead-letter
 * serializer. Registered by its own auto-configuration where the binder is; used for the bindings and destinations of
 * that binder.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.kafka;

import org.jspecify.annotations.NullMarked;
