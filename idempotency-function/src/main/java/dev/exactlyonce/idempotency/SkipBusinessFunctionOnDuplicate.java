package dev.exactlyonce.idempotency;

import java.lang.reflect.Method;
import java.util.Set;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * Decorates a business function composed after the guard: on a duplicate it returns without calling the function.
 *
 * <p>Spring Cloud Function calls the next function of a composition even when the previous one returned
 * {@code null}, so the guard's {@code null} alone would hand the business function a {@code null} input. The
 * decision is read from the {@link GuardedInvocation} the guard marked, never from the input.
 */
final class SkipBusinessFunctionOnDuplicate implements MethodInterceptor {

    private static final Set<String> FUNCTIONAL_METHODS = Set.of("accept", "apply");

    @Override
    public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
        Method method = invocation.getMethod();
        if (method.getParameterCount() == 1
                && FUNCTIONAL_METHODS.contains(method.getName())
                && GuardedInvocation.isDuplicate()) {
            return null;
        }
        return invocation.proceed();
    }
}
