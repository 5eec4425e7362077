package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutageClassifier;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.internal.FunctionDefinitions;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.DatabaseProbe;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import dev.exactlyonce.idempotency.outage.DatabaseAtStartup;
import dev.exactlyonce.idempotency.outage.DatabaseOutages;
import dev.exactlyonce.idempotency.outage.Outage;
import dev.exactlyonce.idempotency.outage.PausedBindings;
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
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Provides the {@code idempotencyGuard} function, decorates the business functions composed after it, and holds a
 * transaction around each message of every guarded binding.
 */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnClass({FunctionCatalog.class, BindableFunctionProxyFactory.class, JdbcTemplate.class})
public class IdempotencyGuardAutoConfiguration {

    @Bean
    static BusinessFunctionDecorator idempotencyBusinessFunctionDecorator(Environment environment) {
        return new BusinessFunctionDecorator(
                FunctionDefinitions.guardedFunctionNames(environment.getProperty(FunctionDefinitions.PROPERTY, "")));
    }

    @Bean
    static GuardedBindingConsumers idempotencyGuardedBindingConsumers(Environment environment) {
        return new GuardedBindingConsumers(FunctionDefinitions.guardedBindingNames(environment));
    }

    /** Waits for the database at start-up, when a definition composes the guard. */
    @Bean
    @ConditionalOnGuardedDefinition
    static DatabaseAtStartup idempotencyDatabaseAtStartup(Environment environment) {
        return new DatabaseAtStartup(Binder.get(environment)
                .bindOrCreate("idempotency", IdempotencyProperties.class)
                .outage());
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
            ObjectProvider<ProcessedEventPartitions> partitions,
            ObjectProvider<EventRoutes> routes) {
        IdempotencyMetrics meters = IdempotencyMetrics.of(metrics);
        ObservationRegistry registry = observations.getIfAvailable();
        return new IdempotencyGuard(
                new EventReader(
                        codec, properties.eventId(), routes.orderedStream().toList()),
                codec,
                Dialect.of(dataSource).processedEvents(new JdbcTemplate(dataSource), properties.tableName()),
                dataSource,
                // The service's registry (Spring Boot's times observations as meters, and traces them when tracing is
                // there), or, when it has none or one without handlers, the library's, which only times them.
                registry != null && !registry.isNoop() ? registry : meters.observations(),
                partitions.getIfAvailable());
    }

    @Bean
    GuardedBindings idempotencyGuardedBindings(
            Environment environment,
            IdempotencyProperties properties,
            ConfigurableListableBeanFactory beanFactory,
            BusinessFunctionDecorator decorator,
            ObjectProvider<DataSource> dataSources,
            ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<Outage> outages,
            ObjectProvider<Outbox> outbox,
            ObjectProvider<BinderConsumerDefaults<?>> consumerDefaults,
            ObjectProvider<BinderGiveBack> giveBacks,
            ObjectProvider<IdempotencyMetrics> metrics) {
        return new GuardedBindings(
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
                        giveBacks.orderedStream().toList()),
                IdempotencyMetrics.of(metrics));
    }

    /** The outage state every guarded binding shares: halts consumption while the database is unavailable. */
    @Bean
    @ConditionalOnSingleCandidate(DataSource.class)
    Outage idempotencyOutage(
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<OutageClassifier> classifiers,
            ObjectProvider<IdempotencyMetrics> metrics,
            ObjectProvider<BindingService> bindingService,
            ObjectProvider<BindingServiceProperties> bindingProperties) {
        return new Outage(
                new DatabaseProbe(dataSource, properties.tableName()),
                new DatabaseOutages(
                        properties.outage().exceptions(),
                        classifiers.orderedStream().toList()),
                properties.outage(),
                IdempotencyMetrics.of(metrics),
                new PausedBindings(bindingService, bindingProperties));
    }
}
