package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.IdempotencyAutoConfiguration;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.observability.IdempotencyEndpoint;
import dev.exactlyonce.idempotency.observability.IdempotencyEndpointAutoConfiguration;
import dev.exactlyonce.idempotency.observability.IdempotencyMetricsAutoConfiguration;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.DatabaseAtStartup;
import dev.exactlyonce.idempotency.outage.IdempotencyOutageAutoConfiguration;
import dev.exactlyonce.idempotency.outbox.IdempotencyOutboxAutoConfiguration;
import dev.exactlyonce.idempotency.outbox.Outbox;
import dev.exactlyonce.idempotency.outbox.OutboxRelay;
import dev.exactlyonce.idempotency.retention.IdempotencyRetentionAutoConfiguration;
import dev.exactlyonce.idempotency.retention.ProcessedEventPartitions;
import dev.exactlyonce.idempotency.retention.ProcessedEventPurge;
import dev.exactlyonce.idempotency.schema.IdempotencyFlywayAutoConfiguration;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.LifecycleProcessor;
import org.springframework.context.support.AbstractApplicationContext;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * Which of the library's beans each auto-configuration defines, under each condition, in milliseconds and without a
 * database or a binder: every bean is lazy, so that none that would reach the DataSource is created (it points at a
 * port where nothing listens), and the assertions read the bean definitions.
 */
class AutoConfigurationConditionsTests {

    private static final String GUARDED = "spring.cloud.function.definition=idempotencyGuard|recordThing";

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(
                    IdempotencyAutoConfiguration.class,
                    IdempotencyGuardAutoConfiguration.class,
                    IdempotencyOutageAutoConfiguration.class,
                    IdempotencyMetricsAutoConfiguration.class,
                    IdempotencyFlywayAutoConfiguration.class,
                    IdempotencyRetentionAutoConfiguration.class,
                    IdempotencyEndpointAutoConfiguration.class,
                    IdempotencyOutboxAutoConfiguration.class))
            .withInitializer(AutoConfigurationConditionsTests::lazily)
            .withBean(DataSource.class, () -> new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:9/nothing"))
            .withPropertyValues("management.endpoints.web.exposure.include=idempotency");

    @Test
    void withoutAGuardedDefinitionOnlyTheOutboxIsDefined() {
        this.runner.run(context -> {
            assertThat(context).hasNotFailed();
            assertDefined(context, Outbox.class, 1);
            assertDefined(context, OutboxRelay.class, 1);
            assertDefined(context, IdempotencyGuard.class, 0);
            assertDefined(context, DatabaseAtStartup.class, 0);
            assertDefined(context, ProcessedEventPurge.class, 0);
            assertDefined(context, ProcessedEventPartitions.class, 0);
            assertDefined(context, IdempotencyEndpoint.class, 0);
        });
    }

    @Test
    void aGuardedDefinitionDefinesTheGuardTheWaitForTheDatabaseThePurgeAndTheReadOnlyEndpoint() {
        this.runner.withPropertyValues(GUARDED).run(context -> {
            assertThat(context).hasNotFailed();
            assertDefined(context, IdempotencyGuard.class, 1);
            assertDefined(context, DatabaseAtStartup.class, 1);
            assertDefined(context, ProcessedEventPurge.class, 1);
            assertDefined(context, ProcessedEventPartitions.class, 0);
            assertDefined(context, IdempotencyEndpoint.class, 1);
            assertThat(context.getBeanFactory().containsBeanDefinition("idempotencyHealthIndicator"))
                    .isTrue();
        });
    }

    @Test
    void partitioningReplacesTheBatchedPurge() {
        this.runner
                .withPropertyValues(GUARDED, "idempotency.partitioning.enabled=true")
                .run(context -> {
                    assertDefined(context, ProcessedEventPartitions.class, 1);
                    assertDefined(context, ProcessedEventPurge.class, 0);
                });
    }

    @Test
    void withoutTheRelayThereIsNoRelayAndNoOutboxHealth() {
        this.runner.withPropertyValues("idempotency.outbox.relay.enabled=false").run(context -> {
            assertDefined(context, Outbox.class, 1);
            assertDefined(context, OutboxRelay.class, 0);
            assertThat(context.getBeanFactory().containsBeanDefinition("outboxHealthIndicator"))
                    .isFalse();
        });
    }

    @Test
    void thePurgesScheduleIsOffWhenThePurgeIsDisabled() {
        this.runner
                .withPropertyValues(GUARDED, "idempotency.purge.enabled=false")
                .run(context -> {
                    assertDefined(context, ProcessedEventPurge.class, 1);
                    assertThat(context.getBeanFactory().containsBeanDefinition("idempotencyPurgeSchedule"))
                            .isFalse();
                    assertThat(context.getBeanFactory().containsBeanDefinition("idempotencyOutboxPurgeSchedule"))
                            .isFalse();
                });
    }

    /** The settings that gave the endpoints their write operations are gone: a service that sets one is told so. */
    @Test
    void aSettingOfTheEndpointsThatIsGoneIsRefusedWithItsReplacement() {
        this.runner
                .withPropertyValues(GUARDED, "idempotency.endpoint.purge-enabled=true")
                .run(context -> assertThat(context)
                        .hasFailed()
                        .getFailure()
                        .rootCause()
                        .hasMessageContaining("management.endpoint.idempotency.access is unrestricted"));
    }

    @Test
    void aServicesOwnIdempotencyGuardBeanIsKept() {
        Consumer<Object> own = event -> {};
        this.runner
                .withPropertyValues(GUARDED)
                .withBean(IdempotencyGuard.NAME, Consumer.class, () -> own)
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertDefined(context, IdempotencyGuard.class, 0);
                    assertThat(context.getBean(IdempotencyGuard.NAME)).isSameAs(own);
                });
    }

    @Test
    void withoutAMeterRegistryTheMetersAreNotRecordedAndWithOneTheyAre() {
        this.runner.withPropertyValues(GUARDED).run(context -> assertDefined(context, IdempotencyMetrics.class, 0));
        this.runner
                .withPropertyValues(GUARDED)
                .withBean(SimpleMeterRegistry.class)
                .run(context -> assertDefined(context, IdempotencyMetrics.class, 1));
    }

    @Test
    void withoutActuatorThereIsNoEndpointAndNoHealthIndicator() {
        this.runner
                .withPropertyValues(GUARDED)
                .withClassLoader(new FilteredClassLoader(Endpoint.class, HealthIndicator.class))
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertDefined(context, IdempotencyGuard.class, 1);
                    assertDefined(context, IdempotencyEndpoint.class, 0);
                    assertThat(context.getBeanFactory().containsBeanDefinition("idempotencyHealthIndicator"))
                            .isFalse();
                });
    }

    @Test
    void withoutADataSourceNothingThatNeedsOneIsDefined() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(
                        IdempotencyAutoConfiguration.class,
                        IdempotencyGuardAutoConfiguration.class,
                        IdempotencyOutageAutoConfiguration.class,
                        IdempotencyRetentionAutoConfiguration.class,
                        IdempotencyEndpointAutoConfiguration.class,
                        IdempotencyOutboxAutoConfiguration.class))
                .withInitializer(AutoConfigurationConditionsTests::lazily)
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertDefined(context, IdempotencyGuard.class, 0);
                    assertDefined(context, Outbox.class, 0);
                    assertDefined(context, ConsumptionHalt.class, 0);
                    assertDefined(context, IdempotencyEndpoint.class, 0);
                });
    }

    /**
     * Creates no bean until asked for, not even those Spring Boot's lazy initialization keeps eager (the guarded
     * bindings' check at start-up, which needs the binder), and starts none (a lifecycle processor that does nothing:
     * the relay and the schedules would be created to be started).
     */
    private static void lazily(ConfigurableApplicationContext context) {
        context.addBeanFactoryPostProcessor(beanFactory -> {
            for (String name : beanFactory.getBeanDefinitionNames()) {
                beanFactory.getBeanDefinition(name).setLazyInit(true);
            }
            beanFactory.registerSingleton(
                    AbstractApplicationContext.LIFECYCLE_PROCESSOR_BEAN_NAME, new StartsNothing());
        });
    }

    private static final class StartsNothing implements LifecycleProcessor {

        @Override
        public void onRefresh() {}

        @Override
        public void onClose() {}

        @Override
        public void start() {}

        @Override
        public void stop() {}

        @Override
        public boolean isRunning() {
            return false;
        }
    }

    /** How many beans of the type are defined, read from the definitions: none of them is created. */
    private static void assertDefined(AssertableApplicationContext context, Class<?> type, int count) {
        assertThat(context.getBeanFactory().getBeanNamesForType(type, true, false))
                .as("beans of type %s", type.getSimpleName())
                .hasSize(count);
    }
}
