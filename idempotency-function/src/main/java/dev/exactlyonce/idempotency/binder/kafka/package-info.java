/**
 * Kafka's binder, where it is: a guarded binding's consumer defaults and checks, its error handlers, the topic a record
 * came from, the relay's sends, and the dead-letter serializer. See docs/reference.md, "Swapping binders".
 */
@NullMarked
package dev.exactlyonce.idempotency.binder.kafka;

import org.jspecify.annotations.NullMarked;
