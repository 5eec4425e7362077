package dev.exactlyonce.idempotency.test;

import org.springframework.boot.jdbc.autoconfigure.JdbcConnectionDetails;
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

    /**
     * Makes this database the service's {@code spring.datasource}, with a pool of at most five connections that
     * shrinks to one when idle (a test run keeps many application contexts, each with its pool, cached at once).
     */
    public void registerDataSource(DynamicPropertyRegistry registry) {
        registerDataSource(registry, this.jdbcUrl);
    }

    /** Makes this database, reached through the proxy, the service's {@code spring.datasource}. */
    public void registerDataSource(DynamicPropertyRegistry registry, TcpProxy proxy) {
        registerDataSource(registry, this.jdbcUrl.replaceFirst("//[^/]+/", "//127.0.0.1:" + proxy.port() + "/"));
    }

    /**
     * This database as Spring Boot's connection details, what {@code @ServiceConnection} makes of a container: declare
     * it as a {@code @Bean} of the test's configuration instead of registering properties. The pool's own settings
     * ({@code spring.datasource.hikari.*}) still apply.
     */
    public JdbcConnectionDetails connectionDetails() {
        return new JdbcConnectionDetails() {

            @Override
            public String getUsername() {
                return TestDatabase.this.username;
            }

            @Override
            public String getPassword() {
                return TestDatabase.this.password;
            }

            @Override
            public String getJdbcUrl() {
                return TestDatabase.this.jdbcUrl;
            }
        };
    }

    private void registerDataSource(DynamicPropertyRegistry registry, String url) {
        registry.add("spring.datasource.url", () -> url);
        registry.add("spring.datasource.username", this::username);
        registry.add("spring.datasource.password", this::password);
        // Test runs keep many application contexts cached at once: a small pool that shrinks when idle keeps them
        // under the server's connection limit.
        registry.add("spring.datasource.hikari.maximum-pool-size", () -> 5);
        registry.add("spring.datasource.hikari.minimum-idle", () -> 1);
        registry.add("spring.datasource.hikari.idle-timeout", () -> 10_000);
    }
}
