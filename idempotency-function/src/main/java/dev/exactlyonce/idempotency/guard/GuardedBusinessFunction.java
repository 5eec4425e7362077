package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.OutgoingEvent;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Set;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.messaging.Message;

/**
 * Decorates a business function composed after the guard: on a duplicate it returns without calling it, though Spring
 * Cloud Function would; on a batch binding it calls a function of one event once per event; it writes the
 * {@link OutgoingEvent}s the last function returns to the outbox, and rethrows an {@link Error} as an
 * {@link IdempotencyException}. See docs/design.md, "How it works".
 */
final class GuardedBusinessFunction implements MethodInterceptor {

    private static final Set<String> FUNCTIONAL_METHODS = Set.of("accept", "apply");

    private final String functionName;

    GuardedBusinessFunction(String functionName) {
        this.functionName = functionName;
    }

    @Override
    public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
        Method method = invocation.getMethod();
        if (method.getParameterCount() != 1 || !FUNCTIONAL_METHODS.contains(method.getName())) {
            return invocation.proceed();
        }
        if (MessageTransaction.skipsBusinessFunctions()) {
            return null;
        }
        try {
            List<MessageTransaction.Delivery> moreEvents = MessageTransaction.takeMoreEvents(this.functionName);
            if (moreEvents.isEmpty()) {
                return MessageTransaction.emit(this.functionName, invocation.proceed());
            }
            // Cloned before it proceeds, so that each call of the function goes through the same advice.
            MethodInvocation next = ((ProxyMethodInvocation) invocation).invocableClone();
            boolean messages = invocation.getArguments()[0] instanceof Message<?>;
            Object result = MessageTransaction.emit(this.functionName, invocation.proceed());
            for (MessageTransaction.Delivery event : moreEvents) {
                MessageTransaction.emit(
                        this.functionName,
                        ((ProxyMethodInvocation) next)
                                .invocableClone(messages ? event.message().get() : event.payload())
                                .proceed());
            }
            return result;
        } catch (Error error) {
            throw thrown(this.functionName, error);
        } catch (RuntimeException ex) {
            throw MessageTransaction.thrown(ex);
        }
    }

    /** The exception that carries an {@link Error} thrown in a guarded invocation through the channel. */
    static IdempotencyException thrown(String functionName, Error error) {
        return new IdempotencyException(functionName + " threw " + error, error);
    }
}
