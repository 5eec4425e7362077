package dev.exactlyonce.idempotency;

import io.micrometer.observation.ObservationRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.listener.CommonDelegatingErrorHandler;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Provides the {@code idempotencyGuard} function, decorates the business functions composed after it, and holds a
 * transaction around each message of every guarded binding.
 */
@AutoConfiguration(after = {DataSourceAutoConfiguration.class, DataSourceTransactionManagerAutoConfiguration.class})
@ConditionalOnClass({FunctionCatalog.class, BindableFunctionProxyFactory.class, JdbcTemplate.class})
@EnableConfigurationProperties(IdempotencyProperties.class)
class IdempotencyAutoConfiguration {

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

    @Bean
    @ConditionalOnMissingBean
    EnvelopeCodec idempotencyEnvelopeCodec(IdempotencyProperties properties) {
        return new EnvelopeCodec(properties.payload().limits());
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

    /**
     * On RabbitMQ: the listener containers log no give-back, and a batch of a guarded batch binding waits for more
     * messages at most {@code idempotency.batch.max-wait}.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(
            name = {
                "org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer",
                "org.springframework.cloud.stream.config.ListenerContainerCustomizer"
            })
    static class Rabbit {

        @Bean
        RabbitContainers idempotencyRabbitContainers(
                IdempotencyProperties properties,
                ObjectProvider<GuardedBindings> guardedBindings,
                BindingServiceProperties bindings) {
            return new RabbitContainers(properties.batch().maxWait(), guardedBindings, bindings);
        }
    }

    /**
     * On Kafka: the error handlers of guarded bindings, which seek back to a record given back during an outage every
     * second, without limit, and handle any other failure as the binder's own handler would: ten deliveries with a
     * dead-letter topic (Spring Kafka's default), one without (the binder's).
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.kafka.listener.DefaultErrorHandler")
    @ConditionalOnSingleCandidate(DataSource.class)
    static class Kafka {

        @Bean(KafkaConsumerDefaults.ERROR_HANDLER)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.ERROR_HANDLER)
        DefaultErrorHandler idempotencyKafkaErrorHandler(Outage outage) {
            return kafkaErrorHandler(outage, new FixedBackOff(0, 9));
        }

        @Bean(KafkaConsumerDefaults.BATCH_ERROR_HANDLER)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.BATCH_ERROR_HANDLER)
        DefaultErrorHandler idempotencyKafkaBatchErrorHandler() {
            return new DefaultErrorHandler(new FixedBackOff(1_000, FixedBackOff.UNLIMITED_ATTEMPTS));
        }

        @Bean(KafkaConsumerDefaults.ERROR_HANDLER_WITHOUT_DLQ)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.ERROR_HANDLER_WITHOUT_DLQ)
        DefaultErrorHandler idempotencyKafkaErrorHandlerWithoutDlq(Outage outage) {
            return kafkaErrorHandler(outage, new FixedBackOff(0, 0));
        }

        /**
         * A batch binding without a dead-letter topic: a batch given back during an outage is delivered again every
         * second, without limit; any other failure is handled as the binder's own handler would (skipped). The
         * back-off function of {@link #kafkaErrorHandler} does not reach a batch's retries, so the exception that
         * gives a batch back picks the handler.
         */
        @Bean(KafkaConsumerDefaults.BATCH_ERROR_HANDLER_WITHOUT_DLQ)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.BATCH_ERROR_HANDLER_WITHOUT_DLQ)
        CommonDelegatingErrorHandler idempotencyKafkaBatchErrorHandlerWithoutDlq() {
            CommonDelegatingErrorHandler handler =
                    new CommonDelegatingErrorHandler(new DefaultErrorHandler(new FixedBackOff(0, 0)));
            DefaultErrorHandler untilOver =
                    new DefaultErrorHandler(new FixedBackOff(1_000, FixedBackOff.UNLIMITED_ATTEMPTS));
            handler.addDelegate(OutageException.class, untilOver);
            handler.setCauseChainTraversing(true);
            return handler;
        }

        /**
         * A record the library gave back (an outage, or a conflict within {@code idempotency.conflicts.max-give-backs})
         * is sought back to without limit: the give-backs are not the record's failures, and counting them would skip
         * the record after ten, neither applied nor dead-lettered.
         */
        private static DefaultErrorHandler kafkaErrorHandler(Outage outage, FixedBackOff otherwise) {
            DefaultErrorHandler handler = new DefaultErrorHandler(otherwise);
            FixedBackOff untilOver = new FixedBackOff(1_000, FixedBackOff.UNLIMITED_ATTEMPTS);
            handler.setBackOffFunction((record, failure) ->
                    outage.isOutage(failure) || OutageGiveBack.isGivenBack(failure) ? untilOver : null);
            return handler;
        }
    }
}
