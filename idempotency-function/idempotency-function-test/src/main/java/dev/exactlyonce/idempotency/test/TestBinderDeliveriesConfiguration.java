package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import org.springframework.cloud.stream.binder.test.InputDestination;
import org.springframework.cloud.stream.binder.test.TestChannelBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Lazy;
import org.springframework.core.env.Environment;

/** {@link EventDeliveries}, for tests that run the bindings on the test binder. */
@Configuration(proxyBeanMethods = false)
class TestBinderDeliveriesConfiguration {

    @Bean
    @Lazy
    EventDeliveries eventDeliveries(
            InputDestination input,
            TestChannelBinder binder,
            EnvelopeCodec codec,
            BindingServiceProperties bindings,
            Environment environment) {
        return new EventDeliveries(input, binder, codec, bindings, environment);
    }
}
