package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.GuardedDefinitions;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;
import org.aopalliance.intercept.MethodInterceptor;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;

/**
 * Watches the service's business functions (those named in {@code spring.cloud.function.definition}): counts their
 * invocations, and on request fails or holds the next ones after they ran, inside their transaction.
 *
 * <p>It wraps the function itself, inside the guard's decoration, so an invocation counts only when the function
 * really ran: a duplicate the guard discarded is not counted.
 */
public final class BusinessFunctionProbe implements BeanPostProcessor, EnvironmentAware, Ordered {

    private Set<String> functionNames = Set.of();

    private final Map<String, AtomicInteger> invocations = new ConcurrentHashMap<>();

    private final Map<String, AtomicInteger> failures = new ConcurrentHashMap<>();

    private final Map<String, Queue<Pause>> pauses = new ConcurrentHashMap<>();

    private final Map<String, Queue<Throwable>> thrown = new ConcurrentHashMap<>();

    @Override
    public void setEnvironment(Environment environment) {
        this.functionNames = GuardedDefinitions.businessFunctionNames(environment);
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }

    /** How many times the function was called (including calls that then failed). */
    public int invocations(String functionName) {
        return counter(this.invocations, functionName).get();
    }

    /** The next {@code count} runs of the function throw an {@link InjectedFailure} after the function ran. */
    public void failNext(String functionName, int count) {
        counter(this.failures, functionName).addAndGet(count);
    }

    /**
     * The next run of the function throws this failure after it ran: any {@link Throwable}, for example an
     * {@link AssertionError} or a {@link StackOverflowError}, to see what the service does with failures that are not
     * exceptions.
     */
    public void failNextWith(String functionName, Throwable failure) {
        this.thrown
                .computeIfAbsent(functionName, name -> new ConcurrentLinkedQueue<>())
                .add(failure);
    }

    /** The next run of the function is held after it ran, until the returned pause is released. */
    public Pause pauseNext(String functionName) {
        Pause pause = new Pause(functionName);
        this.pauses
                .computeIfAbsent(functionName, name -> new ConcurrentLinkedQueue<>())
                .add(pause);
        return pause;
    }

    /** Forgets counts, pending failures and pauses. */
    public void reset() {
        this.invocations.clear();
        this.failures.clear();
        this.pauses.clear();
        this.thrown.clear();
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        if (!this.functionNames.contains(beanName)
                || !(bean instanceof Consumer<?> || bean instanceof Function<?, ?>)) {
            return bean;
        }
        ProxyFactory proxyFactory = new ProxyFactory(bean);
        proxyFactory.addAdvice((MethodInterceptor) invocation -> {
            if (!invocation.getMethod().getName().equals("accept")
                    && !invocation.getMethod().getName().equals("apply")) {
                return invocation.proceed();
            }
            counter(this.invocations, beanName).incrementAndGet();
            Object result = invocation.proceed();
            Queue<Pause> pending = this.pauses.get(beanName);
            Pause pause = pending != null ? pending.poll() : null;
            boolean fail = pause != null && pause.hold();
            if (fail || counter(this.failures, beanName).getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                throw new InjectedFailure(beanName);
            }
            Queue<Throwable> failures = this.thrown.get(beanName);
            Throwable failure = failures != null ? failures.poll() : null;
            if (failure != null) {
                throw failure;
            }
            return result;
        });
        return proxyFactory.getProxy(bean.getClass().getClassLoader());
    }

    private static AtomicInteger counter(Map<String, AtomicInteger> counters, String functionName) {
        return counters.computeIfAbsent(functionName, name -> new AtomicInteger());
    }
}
