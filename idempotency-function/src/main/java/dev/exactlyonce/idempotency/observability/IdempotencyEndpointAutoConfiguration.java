package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.IdempotencyGuardAutoConfiguration;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.IdempotencyOutageAutoConfiguration;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** The {@code idempotency} Actuator endpoint and health contributor, when the service has Actuator and the guard. */
@AutoConfiguration(after = {IdempotencyGuardAutoConfiguration.class, IdempotencyOutageAutoConfiguration.class})
@ConditionalOnClass(Endpoint.class)
@ConditionalOnGuardedDefinition
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyEndpointAutoConfiguration {

    /** Its write operation, the purge, deletes rows: it answers only where its access is unrestricted. */
    @Bean
    @ConditionalOnAvailableEndpoint
    IdempotencyEndpoint idempotencyEndpoint(
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<ProcessedEventPurge> purge,
            ObjectProvider<ProcessedEventPartitions> partitions) {
        return new IdempotencyEndpoint(dataSource, properties, purge.getIfAvailable(), partitions.getIfAvailable());
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    static class Health {

        @Bean
        @ConditionalOnEnabledHealthIndicator("idempotency")
        HealthIndicator idempotencyHealthIndicator(ConsumptionHalt outage) {
            return new OutageHealthIndicator(outage);
        }
    }
}
