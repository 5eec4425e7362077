package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.internal.FunctionDefinitions;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TransactionBounds;
import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outbox.Outbox;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import io.micrometer.observation.ObservationRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;

/** Provides the {@code idempotencyGuard} function, decorates the functions after it, and installs it on bindings. */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnClass({FunctionCatalog.class, BindableFunctionProxyFactory.class, JdbcTemplate.class})
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyGuardAutoConfiguration {

    @Bean
    static BusinessFunctionDecorator idempotencyBusinessFunctionDecorator(Environment environment) {
        return new BusinessFunctionDecorator(
                FunctionDefinitions.guardedFunctionNames(environment.getProperty(FunctionDefinitions.PROPERTY, "")));
    }

    @Bean
    static GuardedConsumerProperties idempotencyGuardedBindingConsumers(Environment environment) {
        return new GuardedConsumerProperties(FunctionDefinitions.guardedBindingNames(environment));
    }

    /**
     * Only where a definition composes it: Spring Cloud Function binds a service's only function when no definition
     * names one, and a service that just emits through the outbox would consume on the guard's behalf.
     */
    @Bean(IdempotencyGuard.NAME)
    @ConditionalOnGuardedDefinition
    @ConditionalOnSingleCandidate(DataSource.class)
    @ConditionalOnMissingBean(name = IdempotencyGuard.NAME)
    IdempotencyGuard idempotencyGuard(
            EnvelopeCodec codec,
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<IdempotencyMetrics> metrics,
            ObjectProvider<ObservationRegistry> observations,
            ObjectProvider<ProcessedEventPartitions> partitions) {
        IdempotencyMetrics meters = IdempotencyMetrics.of(metrics);
        ObservationRegistry registry = observations.getIfAvailable();
        return new IdempotencyGuard(
                new EventReader(codec, properties.eventId()),
                codec,
                Dialect.of(dataSource)
                        .processedEvents(
                                new JdbcTemplate(dataSource),
                                properties.tableName(),
                                TransactionBounds.of(properties.outage().socketTimeout())),
                Dialect.of(dataSource)
                        .deadLetters(
                                new JdbcTemplate(dataSource),
                                properties.tableName(),
                                properties.replayHorizon().deadLetterRetention()),
                dataSource,
                // The service's registry (Spring Boot's times observations as meters, and traces them when tracing is
                // there), or, when it has none or one without handlers, the library's, which only times them.
                registry != null && !registry.isNoop() ? registry : meters.observations(),
                partitions.getIfAvailable());
    }

    @Bean
    GuardInstaller idempotencyGuardedBindings(
            Environment environment,
            IdempotencyProperties properties,
            ConfigurableListableBeanFactory beanFactory,
            BusinessFunctionDecorator decorator,
            ObjectProvider<DataSource> dataSources,
            ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<ConsumptionHalt> outages,
            ObjectProvider<Outbox> outbox,
            ObjectProvider<BinderConsumerDefaults<?>> consumerDefaults,
            ObjectProvider<BinderGiveBack> giveBacks,
            ObjectProvider<EventRoutes> routes,
            ObjectProvider<IdempotencyMetrics> metrics) {
        return new GuardInstaller(
                environment.getProperty(FunctionDefinitions.PROPERTY, ""),
                properties,
                beanFactory,
                decorator,
                dataSources,
                transactionManagers,
                outages,
                outbox,
                new BinderAdapters(
                        consumerDefaults.orderedStream().toList(),
                        giveBacks.orderedStream().toList(),
                        routes.orderedStream().toList()),
                IdempotencyMetrics.of(metrics));
    }
}
