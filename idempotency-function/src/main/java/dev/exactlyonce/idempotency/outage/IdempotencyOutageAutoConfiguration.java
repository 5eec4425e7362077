package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutageClassifier;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.DatabaseProbe;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;

/** The outage halt every guarded binding shares, and the wait for the database at start-up. */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnClass({FunctionCatalog.class, BindableFunctionProxyFactory.class, JdbcTemplate.class})
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyOutageAutoConfiguration {

    @Bean
    @ConditionalOnGuardedDefinition
    static DatabaseAtStartup idempotencyDatabaseAtStartup(Environment environment) {
        return new DatabaseAtStartup(Binder.get(environment)
                .bindOrCreate("idempotency", IdempotencyProperties.class)
                .outage());
    }

    @Bean
    @ConditionalOnSingleCandidate(DataSource.class)
    ConsumptionHalt idempotencyOutage(
            DataSource dataSource,
            IdempotencyProperties properties,
            ObjectProvider<OutageClassifier> classifiers,
            ObjectProvider<IdempotencyMetrics> metrics,
            ObjectProvider<BindingService> bindingService,
            ObjectProvider<BindingServiceProperties> bindingProperties) {
        return new ConsumptionHalt(
                new DatabaseProbe(
                        dataSource, properties.tableName(), properties.outage().socketTimeout()),
                new DatabaseOutageClassifier(
                        properties.outage().exceptions(),
                        classifiers.orderedStream().toList()),
                properties.outage(),
                IdempotencyMetrics.of(metrics),
                new PausedBindings(bindingService, bindingProperties));
    }
}
