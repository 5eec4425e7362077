package dev.exactlyonce.idempotency.internal;

import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * A binding whose function definition starts with the guard ({@code idempotencyGuard|reserveStock}).
 *
 * @param scope the scope of its claims: {@code ""} for the whole service, or the functions after the guard
 * @param takenOverScopes the former scopes this binding alone takes over, and claims under too while declared
 * @param oneEventPerCall on a batch binding, whether the function takes one event: then called once per event
 * @param outputDestination where the last function's events are published; {@code null} for a {@code Consumer}
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
