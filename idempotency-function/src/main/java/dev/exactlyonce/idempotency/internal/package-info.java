/**
 * What the library's packages share and its users do not: start-up refusals, a binding's description, the metrics
 * interface, cause chains, batch headers and schedules. Not API: any of it may change in any release.
 */
@NullMarked
package dev.exactlyonce.idempotency.internal;

import org.jspecify.annotations.NullMarked;
