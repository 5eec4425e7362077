package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.outage.OutageException;
import dev.exactlyonce.idempotency.outage.OutageMet;
import java.util.Set;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.cloud.stream.binder.ConsumerProperties;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.dao.DataIntegrityViolationException;

/**
 * Sets two consumer properties of every guarded binding before the binder reads them: {@code use-native-decoding}
 * (Spring Cloud Function's JSON conversion would turn a JSON array into bytes), and {@code retryable-exceptions}, so
 * that no rejection or give-back of the library's is retried. See docs/reference.md, "Configuration".
 */
final class GuardedConsumerProperties implements BeanPostProcessor {

    private final Set<String> bindingNames;

    GuardedConsumerProperties(Set<String> bindingNames) {
        this.bindingNames = Set.copyOf(bindingNames);
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        if (bean instanceof BindingServiceProperties bindings) {
            for (String bindingName : this.bindingNames) {
                ConsumerProperties consumer = bindings.getConsumerProperties(bindingName);
                consumer.setUseNativeDecoding(true);
                consumer.getRetryableExceptions().put(RejectedMessageException.class, false);
                consumer.getRetryableExceptions().put(OutageException.class, false);
                consumer.getRetryableExceptions().put(OutageMet.class, false);
                consumer.getRetryableExceptions().put(PartlyFailedBatch.class, false);
                // Unless the service says otherwise: the same statement with the same data breaks the same rule again.
                consumer.getRetryableExceptions().putIfAbsent(DataIntegrityViolationException.class, false);
            }
        }
        return bean;
    }
}
