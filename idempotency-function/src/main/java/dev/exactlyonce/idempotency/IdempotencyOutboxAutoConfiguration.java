package dev.exactlyonce.idempotency;

import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.StreamBridge;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The outbox: {@link Outbox} to emit events in a transaction (and the guarded functions' results written through it),
 * the relay that publishes them after the commit, and the purge of published rows.
 */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({IdempotencyProperties.class, OutboxProperties.class})
class IdempotencyOutboxAutoConfiguration {

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
                metrics.getIfAvailable(() -> IdempotencyMetrics.NONE));
    }

    /** Publishes the committed rows through the binder, unless another process does (Debezium, for one). */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.outbox.relay.enabled", matchIfMissing = true)
    static class Relay {

        @Bean
        OutboxRelay idempotencyOutboxRelay(
                DataSource dataSource,
                StreamBridge streamBridge,
                BinderFactory binderFactory,
                BindingServiceProperties bindings,
                EnvelopeCodec codec,
                OutboxProperties properties,
                ObjectProvider<IdempotencyMetrics> metrics) {
            OutboxProperties.Relay relay = properties.relay();
            return new OutboxRelay(
                    dataSource,
                    new OutboxPublisher(streamBridge, binderFactory, bindings, codec, relay.confirmTimeout()),
                    relay.batchSize(),
                    relay.pollInterval(),
                    relay.linger(),
                    metrics.getIfAvailable(() -> IdempotencyMetrics.NONE));
        }
    }

    /**
     * {@code DOWN} when the oldest unpublished row has waited longer than the lag bound. Only with the relay: without
     * it (Debezium publishes the rows) no row is ever marked published.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    @ConditionalOnBooleanProperty(name = "idempotency.outbox.relay.enabled", matchIfMissing = true)
    static class Health {

        @Bean
        @ConditionalOnEnabledHealthIndicator("outbox")
        HealthIndicator outboxHealthIndicator(DataSource dataSource, OutboxProperties properties) {
            return new OutboxHealthIndicator(
                    new OutboxBacklog(dataSource), properties.relay().lagBound());
        }
    }

    /**
     * Deletes the rows published longer ago than {@code idempotency.outbox.retention}; without the relay (Debezium
     * reads the rows from the write-ahead log), the rows written longer ago.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.purge.enabled", matchIfMissing = true)
    static class Purge {

        @Bean
        Schedule idempotencyOutboxPurgeSchedule(
                DataSource dataSource, IdempotencyProperties idempotency, OutboxProperties properties) {
            OutboxPurge purge = new OutboxPurge(
                    dataSource,
                    properties.retention(),
                    idempotency.purge().batchSize(),
                    properties.relay().enabled());
            return new Schedule(
                    "idempotency-outbox-purge",
                    purge::purge,
                    idempotency.purge().initialDelay(),
                    idempotency.purge().interval());
        }
    }
}
