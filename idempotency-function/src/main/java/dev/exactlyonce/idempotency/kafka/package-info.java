/** What the library gives a guarded binding on the Kafka binder. */
@NullMarked
package dev.exactlyonce.idempotency.kafka;

import org.jspecify.annotations.NullMarked;
