package dev.exactlyonce.idempotency.guard;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.Function;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.BeanClassLoaderAware;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.util.ClassUtils;

/**
 * Wraps each {@code Consumer} or {@code Function} bean composed after the guard in {@link GuardedBusinessFunction}, a
 * proxy of the bean's interfaces. See docs/design.md, "How it works".
 */
final class BusinessFunctionDecorator implements BeanPostProcessor, BeanClassLoaderAware {

    private final Set<String> guardedFunctionNames;

    private final Set<String> decorated = ConcurrentHashMap.newKeySet();

    private ClassLoader classLoader = ClassUtils.getDefaultClassLoader();

    BusinessFunctionDecorator(Set<String> guardedFunctionNames) {
        this.guardedFunctionNames = Set.copyOf(guardedFunctionNames);
    }

    @Override
    public void setBeanClassLoader(ClassLoader classLoader) {
        this.classLoader = classLoader;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        if (!this.guardedFunctionNames.contains(beanName)
                || !(bean instanceof Consumer<?> || bean instanceof Function<?, ?>)) {
            return bean;
        }
        ProxyFactory proxyFactory = new ProxyFactory(bean);
        proxyFactory.addAdvice(new GuardedBusinessFunction(beanName));
        this.decorated.add(beanName);
        return proxyFactory.getProxy(this.classLoader);
    }

    /** Whether the bean of that name was decorated: one that was not cannot be protected. */
    boolean isDecorated(String beanName) {
        return this.decorated.contains(beanName);
    }
}
