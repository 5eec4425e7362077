package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/** Records the library's meters ({@link MicrometerIdempotencyMetrics}) when the service has a meter registry. */
@AutoConfiguration(
        before = IdempotencyAutoConfiguration.class,
        afterName = {
            "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
            "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
            "org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration"
        })
@ConditionalOnClass(MeterRegistry.class)
@ConditionalOnBean(MeterRegistry.class)
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyMetricsAutoConfiguration {

    @Bean
    IdempotencyMetrics idempotencyMetrics(MeterRegistry registry, IdempotencyProperties properties) {
        return new MicrometerIdempotencyMetrics(registry, properties.tableName());
    }
}
