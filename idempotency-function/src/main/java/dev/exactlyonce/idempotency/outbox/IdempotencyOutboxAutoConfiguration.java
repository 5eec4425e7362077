package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutboxProperties;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.internal.PeriodicTask;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.sql.init.dependency.DependsOnDatabaseInitialization;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binding.BindingService;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.StreamBridge;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.transaction.ConfigurableTransactionManager;

/**
 * The outbox: {@link Outbox} to emit events in a transaction (and the guarded functions' results written through it),
 * the relay that publishes them after the commit, and the purge of published rows.
 */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({IdempotencyProperties.class, OutboxProperties.class})
public class IdempotencyOutboxAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    Outbox idempotencyOutbox(
            DataSource dataSource,
            EnvelopeCodec codec,
            OutboxProperties properties,
            ObjectProvider<OutboxRelay> relay,
            ObjectProvider<IdempotencyMetrics> metrics) {
        return new Outbox(
                dataSource,
                codec,
                properties.destination(),
                () -> relay.ifAvailable(OutboxRelay::wake),
                IdempotencyMetrics.of(metrics));
    }

    /** Adds the outbox's listener ({@link Outbox#transactionListener()}) to every transaction manager bean. */
    @Bean
    static BeanPostProcessor idempotencyOutboxTransactions() {
        return new BeanPostProcessor() {
            @Override
            public Object postProcessAfterInitialization(Object bean, String beanName) {
                if (bean instanceof ConfigurableTransactionManager manager
                        && !manager.getTransactionExecutionListeners().contains(Outbox.transactionListener())) {
                    manager.addListener(Outbox.transactionListener());
                }
                return bean;
            }
        };
    }

    /** Publishes the committed rows through the binder, unless another process does (Debezium, for one). */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.outbox.relay.enabled", matchIfMissing = true)
    static class Relay {

        @Bean
        @DependsOnDatabaseInitialization
        OutboxRelay idempotencyOutboxRelay(
                DataSource dataSource,
                StreamBridge streamBridge,
                BinderFactory binderFactory,
                BindingServiceProperties bindings,
                BindingService bindingService,
                EnvelopeCodec codec,
                Environment environment,
                OutboxProperties properties,
                ObjectProvider<PublishConfirmation> confirmations,
                ObjectProvider<IdempotencyMetrics> metrics) {
            return new OutboxRelay(
                    dataSource,
                    new OutboxSender(
                            streamBridge,
                            binderFactory,
                            bindings,
                            bindingService,
                            codec,
                            environment,
                            properties.relay().confirmTimeout(),
                            properties.relay().firstHold(),
                            properties.relay().longestHold(),
                            confirmations.orderedStream().toList()),
                    properties.destination(),
                    properties.relay(),
                    IdempotencyMetrics.of(metrics));
        }
    }

    /** Refuses to start an instance that disagrees with the schema's others on who publishes the outbox. */
    @Bean
    @DependsOnDatabaseInitialization
    @ConditionalOnMissingBean
    OutboxPublisherRegistration idempotencyOutboxPublishers(DataSource dataSource, OutboxProperties properties) {
        return new OutboxPublisherRegistration(dataSource, properties.relay().enabled());
    }

    /** The {@code outbox} endpoint: release and skip need {@code management.endpoint.outbox.access: unrestricted}. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(Endpoint.class)
    @ConditionalOnBooleanProperty(name = "idempotency.outbox.relay.enabled", matchIfMissing = true)
    static class Operations {

        @Bean
        @ConditionalOnAvailableEndpoint
        OutboxEndpoint outboxEndpoint(DataSource dataSource, OutboxRelay relay) {
            return new OutboxEndpoint(
                    new OutboxBacklogQuery(dataSource), new ParkedOutboxEvents(dataSource, relay::wake));
        }
    }

    /** The outbox's health, only with the relay: without it no row is ever marked published. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    @ConditionalOnBooleanProperty(name = "idempotency.outbox.relay.enabled", matchIfMissing = true)
    static class Health {

        @Bean
        @ConditionalOnEnabledHealthIndicator("outbox")
        HealthIndicator outboxHealthIndicator(DataSource dataSource, OutboxProperties properties, OutboxRelay relay) {
            return new OutboxHealthIndicator(
                    new OutboxBacklogQuery(dataSource), properties.relay().lagBound(), relay);
        }
    }

    /** Deletes the rows published (without the relay, written) longer ago than {@code idempotency.outbox.retention}. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.purge.enabled", matchIfMissing = true)
    static class Purge {

        @Bean
        PeriodicTask idempotencyOutboxPurgeSchedule(
                DataSource dataSource, IdempotencyProperties idempotency, OutboxProperties properties) {
            OutboxPurge purge = new OutboxPurge(
                    dataSource,
                    properties.retention(),
                    idempotency.purge().batchSize(),
                    properties.relay().enabled());
            return new PeriodicTask(
                    "idempotency-outbox-purge",
                    purge::purge,
                    idempotency.purge().initialDelay(),
                    idempotency.purge().interval());
        }
    }
}
