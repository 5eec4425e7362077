package dev.exactlyonce.idempotency.binder.kafka;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.guard.IdempotencyGuardAutoConfiguration;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.jdbc.DatabaseProbe;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.IdempotencyOutageAutoConfiguration;
import dev.exactlyonce.idempotency.outage.OutageException;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import java.time.Duration;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.kafka.listener.CommonDelegatingErrorHandler;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.util.backoff.ExponentialBackOff;
import org.springframework.util.backoff.FixedBackOff;

/** Kafka's binder, where it is: the consumer defaults and checks of guarded bindings, and their error handlers. */
@AutoConfiguration(after = {IdempotencyGuardAutoConfiguration.class, IdempotencyOutageAutoConfiguration.class})
@ConditionalOnClass(
        name = {
            KafkaConsumerDefaults.PROPERTIES,
            "org.springframework.cloud.stream.binder.kafka.KafkaMessageChannelBinder"
        })
@EnableConfigurationProperties(IdempotencyProperties.class)
public class IdempotencyKafkaAutoConfiguration {

    @Bean
    KafkaConsumerDefaults idempotencyKafkaConsumerDefaults(
            Environment environment,
            IdempotencyProperties properties,
            ObjectProvider<DataSource> dataSource,
            KafkaDeadLetterSends deadLetterSends) {
        DataSource pool = dataSource.getIfUnique();
        return new KafkaConsumerDefaults(
                Binder.get(environment),
                environment,
                properties.outage(),
                pool != null ? DatabaseProbe.connectionWait(pool) : Duration.ZERO,
                deadLetterSends);
    }

    /** Watches the binder's producers for dead letters it could not publish (the binder applies it to each). */
    @Bean
    KafkaDeadLetterSends idempotencyKafkaDeadLetterSends() {
        return new KafkaDeadLetterSends();
    }

    @Bean
    KafkaPublishConfirmation idempotencyKafkaPublishConfirmation() {
        return new KafkaPublishConfirmation();
    }

    @Bean
    KafkaEventRoutes idempotencyKafkaEventRoutes() {
        return new KafkaEventRoutes();
    }

    /** A record given back is sought back to every second, without limit; other failures as the binder's handler. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.kafka.listener.DefaultErrorHandler")
    @ConditionalOnBean(ConsumptionHalt.class)
    static class ErrorHandlers {

        @Bean(KafkaConsumerDefaults.ERROR_HANDLER)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.ERROR_HANDLER)
        DefaultErrorHandler idempotencyKafkaErrorHandler(ConsumptionHalt outage) {
            return kafkaErrorHandler(outage, new FixedBackOff(0, 9));
        }

        /** A batch binding with a dead-letter topic: a batch given back comes again every second, without limit. */
        @Bean(KafkaConsumerDefaults.BATCH_ERROR_HANDLER)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.BATCH_ERROR_HANDLER)
        DefaultErrorHandler idempotencyKafkaBatchErrorHandler() {
            return new DefaultErrorHandler(new FixedBackOff(1_000, FixedBackOff.UNLIMITED_ATTEMPTS));
        }

        @Bean(KafkaConsumerDefaults.TRANSACTIONAL_ERROR_HANDLER)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.TRANSACTIONAL_ERROR_HANDLER)
        TransactionalGiveBacks idempotencyKafkaTransactionalErrorHandler(
                ConsumptionHalt outage, IdempotencyProperties properties) {
            return new TransactionalGiveBacks(outage, properties.conflicts());
        }

        @Bean(KafkaConsumerDefaults.ERROR_HANDLER_WITHOUT_DLQ)
        @ConditionalOnMissingBean(name = KafkaConsumerDefaults.ERROR_HANDLER_WITHOUT_DLQ)
        DefaultErrorHandler idempotencyKafkaErrorHandlerWithoutDlq(ConsumptionHalt outage) {
            return kafkaErrorHandler(outage, new FixedBackOff(0, 0));
        }

        /** A back-off function misses a batch's retries: the exception that gives the batch back picks the handler. */
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

        /** Counted as failures, a record given back would be skipped after ten: neither applied nor dead-lettered. */
        private static DefaultErrorHandler kafkaErrorHandler(ConsumptionHalt outage, FixedBackOff otherwise) {
            DefaultErrorHandler handler = new DefaultErrorHandler(otherwise);
            FixedBackOff untilOver = new FixedBackOff(1_000, FixedBackOff.UNLIMITED_ATTEMPTS);
            ExponentialBackOff untilPublished = untilPublished();
            handler.setBackOffFunction((record, failure) -> {
                if (Failures.find(failure, KafkaDeadLetterSends.NotPublished.class) != null) {
                    return untilPublished;
                }
                return outage.isOutage(failure) || OutageGiveBack.isGivenBack(failure) ? untilOver : null;
            });
            return handler;
        }

        private static ExponentialBackOff untilPublished() {
            ExponentialBackOff backOff = new ExponentialBackOff(1_000, 2.0);
            backOff.setMaxInterval(30_000);
            return backOff;
        }
    }
}
