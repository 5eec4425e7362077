/** A payment provider that honours idempotency keys, for the tests and the demo. */
@NullMarked
package dev.exactlyonce.paymentprovider;

import org.jspecify.annotations.NullMarked;
