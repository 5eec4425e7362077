/**
 * Kafka's binder: the consumer defaults and checks of a guarded binding, its error handlers, and the dead-letter serializer.
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.kafka;

import org.jspecify.annotations.NullMarked;
