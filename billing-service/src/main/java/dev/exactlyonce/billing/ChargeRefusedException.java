package dev.exactlyonce.billing;

/**
 * The payment provider refused a charge for what it asks (a {@code 4xx} answer other than {@code 409} and {@code 429}):
 * asked again, it would refuse again. Not retried (the binding's {@code retryable-exceptions}): the order goes to the
 * dead-letter queue after one attempt. It carries the status, not the provider's answer, whose text (the provider's,
 * not ours) would otherwise reach the logs and the dead letter's headers.
 */
final class ChargeRefusedException extends RuntimeException {

    ChargeRefusedException(int status, String idempotencyKey) {
        super("The payment provider refused the charge with key %s (%d)".formatted(idempotencyKey, status));
    }
}
