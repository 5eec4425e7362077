/**
 * The JSON event envelope producers publish ({@code event_id}, {@code event_name}, {@code occurred_at},
 * {@code payload}), its codec, and the headers the guard hands to business functions.
 */
@NullMarked
package dev.exactlyonce.idempotency.envelope;

import org.jspecify.annotations.NullMarked;
