package dev.exactlyonce.idempotency.schema;

import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import org.flywaydb.core.Flyway;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.flyway.autoconfigure.FlywayAutoConfiguration;
import org.springframework.boot.flyway.autoconfigure.FlywayMigrationInitializer;
import org.springframework.context.annotation.Bean;

/** Creates and migrates the library's tables with Flyway when the service migrates with Flyway. */
@AutoConfiguration(after = {FlywayAutoConfiguration.class, IdempotencyAutoConfiguration.class})
@ConditionalOnClass({Flyway.class, FlywayMigrationInitializer.class})
@ConditionalOnBean(Flyway.class)
@ConditionalOnProperty(prefix = "idempotency", name = "migrate-with-flyway", matchIfMissing = true)
public class IdempotencyFlywayAutoConfiguration {

    @Bean(IdempotencyDatabaseInitializerDetector.MIGRATION_BEAN)
    IdempotencySchemaMigration idempotencySchemaMigration(Flyway serviceFlyway, IdempotencyProperties properties) {
        return new IdempotencySchemaMigration(
                serviceFlyway, properties.tableName(), properties.partitioning().enabled());
    }
}
