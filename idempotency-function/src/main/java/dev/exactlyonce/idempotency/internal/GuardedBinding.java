package dev.exactlyonce.idempotency.internal;

import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * A binding whose function definition starts with the guard.
 *
 * @param bindingName the input binding, for example {@code idempotencyGuardreserveStock-in-0}
 * @param definition the function definition, for example {@code idempotencyGuard|reserveStock}
 * @param businessFunctions the functions composed after the guard
 * @param payloadTypes the payload type of the first business function, per event name
 * @param scope the scope of its claims: {@code ""} for the whole service, or the functions after the guard
 * @param takenOverScopes the former scopes this binding alone takes over ({@code former-scopes}), which it claims
 *     under too while they are declared
 * @param batch whether the binding delivers batches ({@code batch-mode})
 * @param oneEventPerCall on a batch binding, whether the business function takes one event, not a list: the library
 *     then calls it once per event of the batch, all in the batch's transaction
 * @param outputDestination where the events the last function returns are published (through the outbox): the
 *     destination of the definition's output binding; {@code null} when the last function is a {@code Consumer}
 * @param takesMessages whether a business function takes a {@code Message}: only then does the event's message
 *     carry the headers the binder delivered, copied for each event
 * @param routeNames the event names each route may carry besides its own name
 *     ({@code idempotency.bindings.<binding>.routes})
 */
public record GuardedBinding(
        String bindingName,
        String definition,
        List<String> businessFunctions,
        PayloadTypes payloadTypes,
        String scope,
        List<String> takenOverScopes,
        boolean batch,
        boolean oneEventPerCall,
        @Nullable String outputDestination,
        boolean takesMessages,
        Map<String, List<String>> routeNames) {

    /**
     * The scopes it claims under: its own and those it takes over, sorted, so that every instance of every version
     * claims under them in one order and two versions claiming the same event never deadlock.
     */
    public List<String> claimScopes() {
        if (this.takenOverScopes.isEmpty()) {
            return List.of(this.scope);
        }
        return Stream.concat(Stream.of(this.scope), this.takenOverScopes.stream())
                .sorted()
                .toList();
    }

    /** The business functions as the meters and the observation name them: {@code reserveStock}, or {@code a|b}. */
    public String functions() {
        return String.join("|", this.businessFunctions);
    }

    /** The function whose result is the binding's output. */
    public String lastFunction() {
        return this.businessFunctions.get(this.businessFunctions.size() - 1);
    }
}
