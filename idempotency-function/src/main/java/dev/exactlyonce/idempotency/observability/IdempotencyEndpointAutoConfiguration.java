package dev.exactlyonce.idempotency.observability;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.IdempotencyGuardAutoConfiguration;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.outage.IdempotencyOutageAutoConfiguration;
import dev.exactlyonce.idempotency.outage.Outage;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import java.util.List;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The {@code idempotency} Actuator endpoint and health contributor, when the service has Actuator and uses the guard.
 */
@AutoConfiguration(after = {IdempotencyGuardAutoConfiguration.class, IdempotencyOutageAutoConfiguration.class})
@ConditionalOnClass(Endpoint.class)
@ConditionalOnGuardedDefinition
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyEndpointAutoConfiguration {

    @Bean
    @ConditionalOnAvailableEndpoint
    @ConditionalOnBooleanProperty(
            name = "idempotency.endpoint.purge-enabled",
            havingValue = false,
            matchIfMissing = true)
    IdempotencyEndpoint idempotencyEndpoint(
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<ProcessedEventPurge> purge,
            ObjectProvider<ProcessedEventPartitions> partitions) {
        return new IdempotencyEndpoint(dataSource, properties, lastPurge(purge, partitions));
    }

    /** With its write operation, the purge, which deletes rows: only when enabled. */
    @Bean
    @ConditionalOnAvailableEndpoint
    @ConditionalOnBooleanProperty("idempotency.endpoint.purge-enabled")
    PurgingIdempotencyEndpoint purgingIdempotencyEndpoint(
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<ProcessedEventPurge> purge,
            ObjectProvider<ProcessedEventPartitions> partitions) {
        return new PurgingIdempotencyEndpoint(
                dataSource, properties, lastPurge(purge, partitions), purge.getIfAvailable());
    }

    /** The last run of the purge, or of the partitions' maintenance, whichever the service has. */
    private static Supplier<IdempotencyEndpoint.@Nullable LastPurge> lastPurge(
            ObjectProvider<ProcessedEventPurge> purge, ObjectProvider<ProcessedEventPartitions> partitions) {
        return () -> {
            ProcessedEventPurge purging = purge.getIfAvailable();
            ProcessedEventPurge.Run purged = purging != null ? purging.lastRun() : null;
            if (purged != null) {
                return new IdempotencyEndpoint.LastPurge(
                        purged.at(), purged.result().ran(), purged.result().rows(), List.of());
            }
            ProcessedEventPartitions maintaining = partitions.getIfAvailable();
            ProcessedEventPartitions.Run maintained = maintaining != null ? maintaining.lastRun() : null;
            return maintained == null
                    ? null
                    : new IdempotencyEndpoint.LastPurge(
                            maintained.at(),
                            maintained.ran(),
                            0,
                            maintained.result().dropped());
        };
    }

    /** {@code OUT_OF_SERVICE} while an outage halts the guarded bindings. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    static class Health {

        @Bean
        @ConditionalOnEnabledHealthIndicator("idempotency")
        HealthIndicator idempotencyHealthIndicator(Outage outage) {
            return new OutageHealthIndicator(outage);
        }
    }
}
