/**
 * The database layer: a {@link dev.exactlyonce.idempotency.jdbc.Dialect} per database, session locks, the claim store.
 */
@NullMarked
package dev.exactlyonce.idempotency.jdbc;

import org.jspecify.annotations.NullMarked;
