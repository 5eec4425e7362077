/**
 * The JSON event envelope producers publish ({@code event_id}, {@code event_name}, {@code occurred_at},
 * {@code payload}), the names of events, their ids (UUID v7), and the headers the guard hands to business functions:
 * the wire format's types, which depend on nothing of the library. The codec that reads and writes them, and rejects
 * what is not an envelope, is the library's {@code EnvelopeCodec}.
 */
@NullMarked
package dev.exactlyonce.idempotency.envelope;

import org.jspecify.annotations.NullMarked;
