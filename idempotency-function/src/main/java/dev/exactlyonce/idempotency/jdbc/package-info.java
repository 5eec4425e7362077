/**
 * The database layer every package uses: one {@link dev.exactlyonce.idempotency.jdbc.Dialect} per database (PostgreSQL,
 * MariaDB) with its statements, table names, session locks, the claim store and the probe.
 */
@NullMarked
package dev.exactlyonce.idempotency.jdbc;

import org.jspecify.annotations.NullMarked;
