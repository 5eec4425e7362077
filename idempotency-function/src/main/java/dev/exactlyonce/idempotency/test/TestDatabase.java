package dev.exactlyonce.idempotency.test;

import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * A database of the test run's PostgreSQL server (see {@link TestPostgres}).
 *
 * @param name the database name
 * @param jdbcUrl its JDBC URL
 * @param username the user that created it, its owner
 * @param password that user's password
 */
public record TestDatabase(String name, String jdbcUrl, String username, String password) {

    /** Makes this database the service's {@code spring.datasource}. */
    public void registerDataSource(DynamicPropertyRegistry registry) {
        registry.add("spring.datasource.url", this::jdbcUrl);
        registry.add("spring.datasource.username", this::username);
        registry.add("spring.datasource.password", this::password);
    }
}
