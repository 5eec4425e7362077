package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.EnvelopeCodec;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;

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

    @Bean
    @ConditionalOnMissingBean
    EnvelopeCodec idempotencyEnvelopeCodec() {
        return new EnvelopeCodec();
    }

    @Bean(IdempotencyGuard.NAME)
    @ConditionalOnSingleCandidate(DataSource.class)
    @ConditionalOnMissingBean(name = IdempotencyGuard.NAME)
    IdempotencyGuard idempotencyGuard(
            EnvelopeCodec codec,
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<IdempotencyMetrics> metrics,
            ObjectProvider<ProcessedEventPartitions> partitions) {
        return new IdempotencyGuard(
                new EventReader(codec, properties.eventId()),
                codec,
                new ProcessedEventStore(new JdbcTemplate(dataSource), properties.tableName()),
                dataSource,
                metrics.getIfAvailable(() -> IdempotencyMetrics.NONE),
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
            ObjectProvider<IdempotencyMetrics> metrics) {
        return new GuardedBindings(
                environment.getProperty(FunctionDefinitions.PROPERTY, ""),
                properties,
                beanFactory,
                decorator,
                dataSources,
                transactionManagers,
                metrics.getIfAvailable(() -> IdempotencyMetrics.NONE));
    }
}
