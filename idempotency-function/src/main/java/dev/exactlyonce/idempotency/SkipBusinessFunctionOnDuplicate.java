package dev.exactlyonce.idempotency;

import java.lang.reflect.Method;
import java.util.Set;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * Decorates a business function composed after the guard:
 *
 * <ul>
 *   <li>on a duplicate it returns without calling the function. Spring Cloud Function calls the next function of a
 *       composition even when the previous one returned {@code null}, so the guard's {@code null} alone would hand
 *       the business function a {@code null} input. The decision is read from the {@link GuardedInvocation} the guard
 *       marked, never from the input;
 *   <li>an {@link Error} the function throws ({@code AssertionError}, {@code StackOverflowError},
 *       {@code NoClassDefFoundError}, ...) becomes an {@link IdempotencyException} whose cause it is. The message
 *       channel ends a transaction on exceptions only: an {@code Error} would leave it open on the consumer thread,
 *       where the retry would join it and find its own uncommitted claim.
 * </ul>
 */
final class SkipBusinessFunctionOnDuplicate implements MethodInterceptor {

    private static final Set<String> FUNCTIONAL_METHODS = Set.of("accept", "apply");

    private final String functionName;

    SkipBusinessFunctionOnDuplicate(String functionName) {
        this.functionName = functionName;
    }

    @Override
    public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
        Method method = invocation.getMethod();
        if (method.getParameterCount() != 1 || !FUNCTIONAL_METHODS.contains(method.getName())) {
            return invocation.proceed();
        }
        if (GuardedInvocation.isDuplicate()) {
            return null;
        }
        try {
            return invocation.proceed();
        } catch (Error error) {
            throw thrown(this.functionName, error);
        }
    }

    /** The exception that carries an {@link Error} thrown in a guarded invocation through the channel. */
    static IdempotencyException thrown(String functionName, Error error) {
        return new IdempotencyException(functionName + " threw " + error, error);
    }
}
