package dev.exactlyonce.idempotency.schema;

import java.util.Set;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.sql.init.dependency.DatabaseInitializerDetector;

/**
 * Tells Spring Boot that the library's migration ({@link IdempotencySchemaMigration}) initializes the database: it runs
 * after the service's Flyway migrations (its order comes after Flyway's detectors), and every bean that depends on
 * database initialization ({@code @DependsOnDatabaseInitialization}: the purge, the partitions) waits for it. Found by
 * bean name, so that a service without Flyway never loads a Flyway class.
 */
public class IdempotencyDatabaseInitializerDetector implements DatabaseInitializerDetector {

    public static final String MIGRATION_BEAN = "idempotencySchemaMigration";

    @Override
    public Set<String> detect(ConfigurableListableBeanFactory beanFactory) {
        return beanFactory.containsBeanDefinition(MIGRATION_BEAN) ? Set.of(MIGRATION_BEAN) : Set.of();
    }

    /** After Flyway's detectors (order 1): the service's migrations first, then the library's. */
    @Override
    public int getOrder() {
        return 2;
    }
}
