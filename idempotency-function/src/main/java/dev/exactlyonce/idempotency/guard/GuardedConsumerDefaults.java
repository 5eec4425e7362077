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
 * Sets two consumer properties of every guarded binding, before the binder and Spring Cloud Function read them:
 *
 * <ul>
 *   <li>{@code use-native-decoding}: the guard reads the message body as the binder delivered it and maps the payload
 *       itself. Left to Spring Cloud Function, a JSON body would be converted for the guard's {@code byte[]} input by
 *       the JSON converter, which turns a JSON array into bytes and a JSON string into base64-decoded bytes;
 *   <li>{@code retryable-exceptions}: a {@link RejectedMessageException} is never retried, nor is an
 *       {@link OutageException} (a message given back while a dependency is unavailable), nor an {@link OutageMet}
 *       (an attempt that met an outage, tried again in place by the library without using an attempt), nor a batch
 *       whose other messages were processed ({@link PartlyFailedBatch}); nor, unless the binding's
 *       {@code retryable-exceptions} says otherwise, a {@link DataIntegrityViolationException} (SQLSTATE classes 22
 *       and 23: a value out of range, a constraint broken), which the same data meets again on every attempt: the
 *       message goes to the dead-letter queue at once, and in batch mode costs one attempt of its own, not a retry
 *       loop.
 * </ul>
 */
final class GuardedConsumerDefaults implements BeanPostProcessor {

    private final Set<String> bindingNames;

    GuardedConsumerDefaults(Set<String> bindingNames) {
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
