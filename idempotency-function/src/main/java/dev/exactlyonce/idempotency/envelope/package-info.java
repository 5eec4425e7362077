/**
 * The wire format's types, which depend on nothing of the library: the JSON event envelope, event names, ids (UUID v7)
 * and the headers the guard hands to business functions. See docs/reference.md, "The envelope".
 */
@NullMarked
package dev.exactlyonce.idempotency.envelope;

import org.jspecify.annotations.NullMarked;
