package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import javax.sql.DataSource;
import org.springframework.cloud.stream.binder.test.InputDestination;
import org.springframework.cloud.stream.binder.test.TestChannelBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Lazy;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;

/** The beans of {@link EnableIdempotencyTestKit}. */
@Configuration(proxyBeanMethods = false)
class IdempotencyTestKitConfiguration {

    @Bean
    static BusinessFunctionProbe businessFunctionProbe() {
        return new BusinessFunctionProbe();
    }

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

    @Bean
    ProcessedEvents processedEvents(DataSource dataSource, IdempotencyProperties properties) {
        return new ProcessedEvents(new JdbcTemplate(dataSource), properties.tableName());
    }
}
