package dev.exactlyonce.idempotency.schema;

import java.util.Set;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.sql.init.dependency.DatabaseInitializerDetector;

/**
 * Tells Spring Boot that {@link IdempotencySchemaMigration} initializes the database, after the service's Flyway, and
 * before the beans that depend on initialization. Found by bean name: a service without Flyway loads no Flyway class.
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
