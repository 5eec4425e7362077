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
 * Decorates a business function composed after the guard:
 *
 * <ul>
 *   <li>on a duplicate it returns without calling the function. Spring Cloud Function calls the next function of a
 *       composition even when the previous one returned {@code null}, so the guard's {@code null} alone would hand
 *       the business function a {@code null} input. The decision is read from the {@link GuardedInvocation} the guard
 *       marked, never from the input;
 *   <li>on a batch binding whose business function takes one event, Spring Cloud Function calls it with the first
 *       event of the batch; it is then called again with each of the others, in the same transaction (as the payload,
 *       or as the event's message with its headers when the function takes a {@code Message});
 *   <li>what the last function of the composition returns (its {@link OutgoingEvent}s) is written to the outbox, in
 *       the message's transaction, and the function returns {@code null} to the binder: nothing is sent to the output
 *       binding before the commit; the relay publishes the events after it;
 *   <li>an {@link Error} the function throws ({@code AssertionError}, {@code StackOverflowError},
 *       {@code NoClassDefFoundError}, ...) becomes an {@link IdempotencyException} whose cause it is. The message
 *       channel ends a transaction on exceptions only: an {@code Error} would leave it open on the consumer thread,
 *       where the retry would join it and find its own uncommitted claim;
 *   <li>an exception that is an outage (a business statement the database fails, a dependency the service declares)
 *       is thrown as an {@link dev.exactlyonce.idempotency.outage.OutageMet}: the binder spends none of the message's
 *       attempts on it, and the library tries the delivery again in place once the outage ends.
 * </ul>
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
        if (GuardedInvocation.skipsBusinessFunctions()) {
            return null;
        }
        try {
            List<GuardedInvocation.Delivery> moreEvents = GuardedInvocation.takeMoreEvents(this.functionName);
            if (moreEvents.isEmpty()) {
                return GuardedInvocation.emit(this.functionName, invocation.proceed());
            }
            // Cloned before it proceeds, so that each call of the function goes through the same advice.
            MethodInvocation next = ((ProxyMethodInvocation) invocation).invocableClone();
            boolean messages = invocation.getArguments()[0] instanceof Message<?>;
            Object result = GuardedInvocation.emit(this.functionName, invocation.proceed());
            for (GuardedInvocation.Delivery event : moreEvents) {
                GuardedInvocation.emit(
                        this.functionName,
                        ((ProxyMethodInvocation) next)
                                .invocableClone(messages ? event.message().get() : event.payload())
                                .proceed());
            }
            return result;
        } catch (Error error) {
            throw thrown(this.functionName, error);
        } catch (RuntimeException ex) {
            throw GuardedInvocation.thrown(ex);
        }
    }

    /** The exception that carries an {@link Error} thrown in a guarded invocation through the channel. */
    static IdempotencyException thrown(String functionName, Error error) {
        return new IdempotencyException(functionName + " threw " + error, error);
    }
}
