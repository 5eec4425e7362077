package dev.exactlyonce.idempotency.retention;

import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.internal.ConditionalOnGuardedDefinition;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.internal.PeriodicTask;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import java.time.Clock;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.sql.init.dependency.DatabaseInitializationDependencyConfigurer;
import org.springframework.boot.sql.init.dependency.DependsOnDatabaseInitialization;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;

/** Keeps processed ids for the retention and no longer: the purge, or the maintenance of the partitioned table. */
@AutoConfiguration(after = IdempotencyAutoConfiguration.class)
@ConditionalOnGuardedDefinition
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(IdempotencyProperties.class)
@Import(DatabaseInitializationDependencyConfigurer.class)
public class IdempotencyRetentionAutoConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.partitioning.enabled", havingValue = false, matchIfMissing = true)
    static class Purge {

        @Bean
        @DependsOnDatabaseInitialization
        ProcessedEventPurge idempotencyPurge(
                DataSource dataSource, IdempotencyProperties properties, ObjectProvider<IdempotencyMetrics> metrics) {
            return new ProcessedEventPurge(
                    dataSource,
                    properties.tableName(),
                    properties.retention(),
                    properties.purge().batchSize(),
                    IdempotencyMetrics.of(metrics));
        }

        @Bean
        @ConditionalOnBooleanProperty(name = "idempotency.purge.enabled", matchIfMissing = true)
        PeriodicTask idempotencyPurgeSchedule(
                ProcessedEventPurge purge,
                DataSource dataSource,
                IdempotencyProperties properties,
                ObjectProvider<IdempotencyMetrics> metrics) {
            return new PeriodicTask(
                    "idempotency-purge",
                    withDeadLetters(purge::purge, dataSource, properties, IdempotencyMetrics.of(metrics)),
                    properties.purge().initialDelay(),
                    properties.purge().interval());
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty(name = "idempotency.partitioning.enabled")
    static class Partitions {

        /** Makes the first partitions as it is created: after the table was migrated (it depends on it). */
        @Bean
        @DependsOnDatabaseInitialization
        ProcessedEventPartitions idempotencyPartitions(
                DataSource dataSource, IdempotencyProperties properties, ObjectProvider<IdempotencyMetrics> metrics) {
            Dialect.of(dataSource)
                    .require(
                            Dialect.Feature.PARTITIONING,
                            "Set idempotency.partitioning.enabled=false: the purge then deletes the ids older than the"
                                    + " retention in batches");
            ProcessedEventPartitions partitions = new ProcessedEventPartitions(
                    dataSource,
                    properties.tableName(),
                    properties.retention(),
                    properties.partitioning().daysAhead(),
                    Clock.systemUTC(),
                    IdempotencyMetrics.of(metrics));
            partitions.maintain();
            return partitions;
        }

        @Bean
        PeriodicTask idempotencyPartitionSchedule(
                ProcessedEventPartitions partitions,
                DataSource dataSource,
                IdempotencyProperties properties,
                ObjectProvider<IdempotencyMetrics> metrics) {
            return new PeriodicTask(
                    "idempotency-partitions",
                    withDeadLetters(partitions::maintain, dataSource, properties, IdempotencyMetrics.of(metrics)),
                    properties.purge().interval(),
                    properties.purge().interval());
        }
    }

    /** The purge, then the dead letters' records ({@link DeadLetterHorizon}), where the schema holds them. */
    static Runnable withDeadLetters(
            Runnable purge, DataSource dataSource, IdempotencyProperties properties, IdempotencyMetrics metrics) {
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        String table = DeadLetterRecords.tableOf(properties.tableName());
        return () -> {
            purge.run();
            if (TableName.exists(jdbc, table)) {
                new DeadLetterHorizon(
                                Dialect.of(dataSource)
                                        .deadLetters(
                                                jdbc,
                                                properties.tableName(),
                                                properties.replayHorizon().deadLetterRetention()),
                                metrics)
                        .run();
            }
        };
    }
}
