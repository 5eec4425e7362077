package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.NestedExceptionUtils;

/**
 * A service started as a deployment starts it: its configuration class run as an application, without a web server,
 * with its settings as command-line properties; for the tests that start one several times, or that expect its
 * start-up to fail.
 */
public final class Deployment {

    private final Class<?> service;

    private final List<String> properties = new ArrayList<>(List.of("spring.main.banner-mode=off"));

    private Deployment(Class<?> service) {
        this.service = service;
    }

    public static Deployment of(Class<?> service) {
        return new Deployment(service);
    }

    /** The service's DataSource: that database. */
    public Deployment on(TestDatabase database) {
        return on(database, database.jdbcUrl());
    }

    /** The service's DataSource: that database, reached through the proxy. */
    public Deployment on(TestDatabase database, TcpProxy proxy) {
        return on(database, database.jdbcUrl().replaceFirst("//[^/]+/", "//127.0.0.1:" + proxy.port() + "/"));
    }

    /** The service's RabbitMQ: that broker. */
    public Deployment on(TestRabbit rabbit) {
        return with(
                "spring.rabbitmq.host=" + rabbit.host(),
                "spring.rabbitmq.port=" + rabbit.port(),
                "spring.rabbitmq.username=" + rabbit.username(),
                "spring.rabbitmq.password=" + rabbit.password());
    }

    public Deployment with(String... properties) {
        this.properties.addAll(List.of(properties));
        return this;
    }

    public ConfigurableApplicationContext start() {
        return new SpringApplicationBuilder(this.service)
                .web(WebApplicationType.NONE)
                .run(this.properties.stream().map(property -> "--" + property).toArray(String[]::new));
    }

    /** Why the service refused to start (the most specific cause); fails the test when it started. */
    public Throwable startupFailure() {
        try (ConfigurableApplicationContext context = start()) {
            throw new AssertionError("the service started with " + this.properties);
        } catch (RuntimeException ex) {
            return NestedExceptionUtils.getMostSpecificCause(ex);
        }
    }

    private Deployment on(TestDatabase database, String jdbcUrl) {
        if (jdbcUrl.startsWith("jdbc:mariadb:")) {
            // The test service's own tables, in MariaDB's SQL.
            with("spring.flyway.locations=classpath:db/migration-mariadb");
        }
        return with(
                "spring.datasource.url=" + jdbcUrl,
                "spring.datasource.username=" + database.username(),
                "spring.datasource.password=" + database.password());
    }
}
