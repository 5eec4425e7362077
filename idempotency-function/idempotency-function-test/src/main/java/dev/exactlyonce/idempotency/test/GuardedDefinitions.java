package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.internal.FunctionDefinitions;
import java.util.List;
import java.util.Set;
import org.springframework.core.env.Environment;

/**
 * What a service's {@code spring.cloud.function.definition} guards, read as the library reads it: for tools such as
 * the test kit, which must find the guarded bindings and functions before the context has bound them.
 */
public final class GuardedDefinitions {

    private GuardedDefinitions() {}

    /**
     * The input bindings of the definitions that compose the guard: {@code <functions concatenated>-in-0}, or the name
     * {@code spring.cloud.stream.function.bindings.<that>} gives it.
     *
     * @throws IdempotencyException when a definition composes the guard anywhere but first, or with nothing after it
     */
    public static List<String> bindingNames(Environment environment) {
        return List.copyOf(FunctionDefinitions.guardedBindingNames(environment));
    }

    /**
     * The business functions: those composed after the guard, in every definition.
     *
     * @throws IdempotencyException when a definition composes the guard anywhere but first, or with nothing after it
     */
    public static Set<String> businessFunctionNames(Environment environment) {
        return FunctionDefinitions.guardedFunctionNames(environment.getProperty(FunctionDefinitions.PROPERTY, ""));
    }
}
