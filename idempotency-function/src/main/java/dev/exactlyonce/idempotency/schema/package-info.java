/**
 * The library's tables: the Flyway migrations per database, and the start-up migration when the service has no Flyway.
 */
@NullMarked
package dev.exactlyonce.idempotency.schema;

import org.jspecify.annotations.NullMarked;
