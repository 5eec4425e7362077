/**
 * The library's tables: the Flyway migrations per database, run when the service migrates with Flyway. Without
 * Flyway, the service creates them from the SQL scripts in the jar ({@code dev/exactlyonce/idempotency/schema-*.sql}).
 */
@NullMarked
package dev.exactlyonce.idempotency.schema;

import org.jspecify.annotations.NullMarked;
