package dev.exactlyonce.idempotency;

import java.util.List;

/**
 * A binding whose function definition starts with the guard.
 *
 * @param bindingName the input binding, for example {@code idempotencyGuardreserveStock-in-0}
 * @param definition the function definition, for example {@code idempotencyGuard|reserveStock}
 * @param businessFunctions the functions composed after the guard
 * @param payloadTypes the payload type of the first business function, per event name
 * @param scope the scope of its claims: {@code ""} for the whole service, or the functions after the guard
 * @param batch whether the binding delivers batches ({@code batch-mode})
 * @param oneEventPerCall on a batch binding, whether the business function takes one event, not a list: the library
 *     then calls it once per event of the batch, all in the batch's transaction
 */
record GuardedBinding(
        String bindingName,
        String definition,
        List<String> businessFunctions,
        PayloadTypes payloadTypes,
        String scope,
        boolean batch,
        boolean oneEventPerCall) {}
