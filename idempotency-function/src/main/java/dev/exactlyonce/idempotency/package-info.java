/**
 * The library's API: its properties, the envelope's codec, the events a business function returns, the exceptions, the
 * outage classifier and the auto-configuration the others come after. See docs/design.md, "The packages".
 */
@NullMarked
package dev.exactlyonce.idempotency;

import org.jspecify.annotations.NullMarked;
