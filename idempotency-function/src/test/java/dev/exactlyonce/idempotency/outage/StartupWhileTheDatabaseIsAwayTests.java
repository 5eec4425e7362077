package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.guard.GuardInstaller;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.test.TcpProxy;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.cloud.stream.binder.test.EnableTestBinder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** A service started while its database is away waits for it, and starts once it answers, or fails saying so. */
class StartupWhileTheDatabaseIsAwayTests {

    private static final TestDatabase database = TestPostgres.newDatabase("startup-outage");

    private final TcpProxy postgres =
            TcpProxy.to(TestPostgres.server().host(), TestPostgres.server().port());

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    @EnableTestBinder
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing() {
            return thing -> {};
        }
    }

    @AfterEach
    void close() {
        this.postgres.close();
    }

    @Test
    void startUpWaitsForTheDatabaseAndGoesOnOnceItAnswers() throws Exception {
        this.postgres.cut();

        CompletableFuture<ConfigurableApplicationContext> starting = CompletableFuture.supplyAsync(this::start);
        await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(3)).until(() -> !starting.isDone());
        this.postgres.restore();

        try (ConfigurableApplicationContext service = starting.get(60, TimeUnit.SECONDS)) {
            assertThat(service.getBean(GuardInstaller.class).bindings()).hasSize(1);
        }
    }

    @Test
    void startUpFailsSayingWhatToDoOnceItHasWaitedLongEnough() {
        this.postgres.cut();

        assertThatThrownBy(() -> start("idempotency.outage.startup-wait=1s").close())
                .satisfies(failure -> assertThat(Failures.find(failure, IdempotencyException.class))
                        .hasMessageStartingWith("The database of DataSource 'dataSource' did not answer within PT1S")
                        .hasMessageContaining("idempotency.outage.startup-wait"));
    }

    private ConfigurableApplicationContext start(String... properties) {
        return Deployment.of(Service.class)
                .on(database, this.postgres)
                .with(
                        "spring.cloud.function.definition=idempotencyGuard|recordThing",
                        "spring.datasource.hikari.connection-timeout=500",
                        "idempotency.outage.probe-initial-interval=200ms",
                        "idempotency.outage.probe-max-interval=500ms")
                .with(properties)
                .start();
    }
}
