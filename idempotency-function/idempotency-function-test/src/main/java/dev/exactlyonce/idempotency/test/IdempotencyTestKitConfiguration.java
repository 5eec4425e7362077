package dev.exactlyonce.idempotency.test;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import javax.sql.DataSource;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;

/** The beans of {@link EnableIdempotencyTestKit} that work on any binder. */
@Configuration(proxyBeanMethods = false)
class IdempotencyTestKitConfiguration {

    @Bean
    static BusinessFunctionProbe businessFunctionProbe() {
        return new BusinessFunctionProbe();
    }

    @Bean
    DeliveryRecorder deliveryRecorder(ListableBeanFactory beanFactory, Environment environment) {
        return new DeliveryRecorder(beanFactory, environment);
    }

    @Bean
    ProcessedEvents processedEvents(DataSource dataSource, IdempotencyProperties properties) {
        return new ProcessedEvents(new JdbcTemplate(dataSource), properties.tableName());
    }
}
