package dev.exactlyonce.idempotency.test;

import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;
import org.aopalliance.intercept.MethodInterceptor;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.transaction.ConfigurableTransactionManager;
import org.springframework.transaction.TransactionExecution;
import org.springframework.transaction.TransactionExecutionListener;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Watches the service's business functions (those named in {@code spring.cloud.function.definition}): counts their
 * invocations, and on request fails or holds the next ones after they ran, inside their transaction.
 *
 * <p>It wraps the function itself, inside the guard's decoration, so an invocation counts only when the function
 * really ran: a duplicate the guard discarded is not counted. A failure it injects ({@link #failNext}) fails the
 * transaction's commit, after the function returned and the events it emitted were written to the outbox, where a
 * real failure of the commit would roll them back with the effect.
 *
 * <p>It fails loudly rather than let a test pass on nothing: a guarded function it could not wrap (declared as a
 * {@code FunctionRegistration}, or as a bean of another name) fails the start-up, and a name it does not watch (a typo)
 * fails the call.
 */
public final class BusinessFunctionProbe
        implements BeanPostProcessor, EnvironmentAware, Ordered, SmartInitializingSingleton {

    private Set<String> functionNames = Set.of();

    private final Set<String> wrapped = ConcurrentHashMap.newKeySet();

    /** The function whose injected failure the transaction running on this thread is to fail its commit with. */
    private final ThreadLocal<String> failingCommit = new ThreadLocal<>();

    /** Whether this thread delivers a message of a guarded binding, whose commit {@link #failAtCommit} can fail. */
    private final ThreadLocal<Boolean> guardedSend = new ThreadLocal<>();

    private final Map<String, AtomicInteger> invocations = new ConcurrentHashMap<>();

    private final Map<String, AtomicInteger> failures = new ConcurrentHashMap<>();

    private final Map<String, Queue<Pause>> pauses = new ConcurrentHashMap<>();

    private final Map<String, Queue<Throwable>> thrown = new ConcurrentHashMap<>();

    /** The service's transaction managers: the injected failures of commits are theirs (see failAtCommit). */
    private final Set<ConfigurableTransactionManager> transactionManagers = ConcurrentHashMap.newKeySet();

    /**
     * Fails the commit of a transaction whose function was asked to fail, once every other listener of the manager
     * ran (the outbox's, which writes the rows as the transaction commits): it throws, and the manager rolls back.
     */
    private final TransactionExecutionListener commitFailure = new TransactionExecutionListener() {
        @Override
        public void beforeCommit(TransactionExecution transaction) {
            if (transaction.isNewTransaction()
                    && TransactionSynchronizationManager.getResource(this) instanceof String functionName) {
                TransactionSynchronizationManager.unbindResource(this);
                throw new InjectedFailure(functionName);
            }
        }

        @Override
        public void afterCommit(TransactionExecution transaction, @Nullable Throwable commitFailure) {
            TransactionSynchronizationManager.unbindResourceIfPossible(this);
        }

        @Override
        public void afterRollback(TransactionExecution transaction, @Nullable Throwable rollbackFailure) {
            TransactionSynchronizationManager.unbindResourceIfPossible(this);
        }
    };

    @Override
    public void setEnvironment(Environment environment) {
        this.functionNames = GuardedDefinitions.businessFunctionNames(environment);
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }

    /**
     * How many times the function was called (including calls that then failed).
     *
     * @throws IllegalArgumentException when no business function of that name is watched
     */
    public int invocations(String functionName) {
        return counter(this.invocations, watched(functionName)).get();
    }

    /**
     * The next {@code count} runs of the function fail with an {@link InjectedFailure}: each runs, emits what it
     * emits, and its transaction's commit fails once the outbox rows are written, so everything rolls back. One
     * failure per attempt: in a batch, the call that takes one fails the batch's commit, and its later calls run on.
     * Called outside the delivery of a guarded message (a test's own transaction), the run throws at once.
     *
     * @throws IllegalArgumentException when no business function of that name is watched
     */
    public void failNext(String functionName, int count) {
        counter(this.failures, watched(functionName)).addAndGet(count);
    }

    /**
     * The next run of the function throws this failure after it ran: any {@link Throwable}, for example an
     * {@link AssertionError} or a {@link StackOverflowError}, to see what the service does with failures that are not
     * exceptions.
     */
    public void failNextWith(String functionName, Throwable failure) {
        this.thrown
                .computeIfAbsent(watched(functionName), name -> new ConcurrentLinkedQueue<>())
                .add(failure);
    }

    /** The next run of the function is held after it ran, until the returned pause is released. */
    public Pause pauseNext(String functionName) {
        Pause pause = new Pause(watched(functionName));
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
        if (bean instanceof ConfigurableTransactionManager transactionManager) {
            this.transactionManagers.add(transactionManager);
        }
        if (!this.functionNames.contains(beanName)
                || !(bean instanceof Consumer<?> || bean instanceof Function<?, ?>)) {
            return bean;
        }
        this.wrapped.add(beanName);
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
            boolean atCommit = Boolean.TRUE.equals(this.guardedSend.get())
                    && TransactionSynchronizationManager.isSynchronizationActive();
            if (atCommit && this.failingCommit.get() != null) {
                // The attempt fails already: one failure per attempt, as when the first call threw (a batch calls the
                // function once per event).
                return result;
            }
            if (fail || counter(this.failures, beanName).getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                if (!atCommit) {
                    throw new InjectedFailure(beanName);
                }
                // Failed at the commit (see failAtCommit), once what the function emits is written.
                this.failingCommit.set(beanName);
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

    /** Every guarded business function must be watched, or a test's count of its invocations would read 0. */
    @Override
    public void afterSingletonsInstantiated() {
        // Last of each manager's listeners: added once every other was.
        this.transactionManagers.forEach(transactionManager -> transactionManager.addListener(this.commitFailure));
        Set<String> unwatched = new TreeSet<>(this.functionNames);
        unwatched.removeAll(this.wrapped);
        if (!unwatched.isEmpty()) {
            throw new IllegalStateException(("The test kit's BusinessFunctionProbe cannot watch %s: it wraps a guarded"
                            + " business function declared as a bean of the name the function definition gives it, a"
                            + " java.util.function.Function or Consumer (not a FunctionRegistration, nor a bean of"
                            + " another name), and would count 0 invocations of it whatever happened. Declare it so, or"
                            + " leave the function out of the tests that use the probe")
                    .formatted(unwatched));
        }
    }

    /**
     * The interceptor, placed before the transaction's on each guarded input channel, that fails the commit of a
     * transaction in which a function was asked to fail: the probe's listener, the last of its transaction manager's,
     * throws once the outbox rows are written, and the manager rolls back the claim, the effect and the rows.
     */
    ChannelInterceptor failAtCommit() {
        return new ChannelInterceptor() {
            @Override
            public Message<?> preSend(Message<?> message, MessageChannel channel) {
                BusinessFunctionProbe.this.guardedSend.set(Boolean.TRUE);
                BusinessFunctionProbe.this.failingCommit.remove();
                return message;
            }

            @Override
            public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
                String functionName = BusinessFunctionProbe.this.failingCommit.get();
                BusinessFunctionProbe.this.failingCommit.remove();
                if (functionName == null) {
                    return;
                }
                if (!TransactionSynchronizationManager.isSynchronizationActive()) {
                    throw new InjectedFailure(functionName);
                }
                if (!BusinessFunctionProbe.this.transactionManagers.isEmpty()) {
                    TransactionSynchronizationManager.unbindResourceIfPossible(
                            BusinessFunctionProbe.this.commitFailure);
                    TransactionSynchronizationManager.bindResource(
                            BusinessFunctionProbe.this.commitFailure, functionName);
                    return;
                }
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void beforeCommit(boolean readOnly) {
                        throw new InjectedFailure(functionName);
                    }
                });
            }

            @Override
            public void afterSendCompletion(
                    Message<?> message, MessageChannel channel, boolean sent, @Nullable Exception failure) {
                BusinessFunctionProbe.this.failingCommit.remove();
                BusinessFunctionProbe.this.guardedSend.remove();
            }
        };
    }

    private String watched(String functionName) {
        if (!this.wrapped.contains(functionName)) {
            throw new IllegalArgumentException("No business function named '%s' is watched; the probe watches %s"
                    .formatted(functionName, new TreeSet<>(this.wrapped)));
        }
        return functionName;
    }

    private static AtomicInteger counter(Map<String, AtomicInteger> counters, String functionName) {
        return counters.computeIfAbsent(functionName, name -> new AtomicInteger());
    }
}
