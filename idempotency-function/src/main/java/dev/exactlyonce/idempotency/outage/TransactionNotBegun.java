package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;

/**
 * The transaction of a message could not begin: the database refused a connection, or the transaction, whatever the
 * reason it gave (a role locked out, a password rotated, a database renamed, too many connections). Nothing in a
 * message can cause it, so it is always an outage ({@link DatabaseOutageClassifier}): the message is retried once
 * consumption resumes, never dead-lettered for it.
 */
public final class TransactionNotBegun extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    public TransactionNotBegun(String bindingName, RuntimeException cause) {
        super(
                "Could not begin the transaction of a message of %s: %s".formatted(bindingName, cause.getMessage()),
                cause);
    }
}
