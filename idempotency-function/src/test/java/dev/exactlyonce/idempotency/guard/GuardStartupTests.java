package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.ResourcelessTransactionManager;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.cloud.stream.binder.test.EnableTestBinder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.messaging.Message;
import org.springframework.transaction.PlatformTransactionManager;
import reactor.core.publisher.Flux;

/** Start-up fails, saying what to change, wherever the guard's guarantee could not hold. */
class GuardStartupTests {

    private static final TestDatabase database = TestPostgres.newDatabase("startup");

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    @EnableTestBinder
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing() {
            return thing -> {};
        }

        @Bean
        Consumer<Flux<ThingHappened>> recordThingsReactively() {
            return things -> things.subscribe();
        }

        @Bean
        Consumer<List<ThingHappened>> recordThingBatches() {
            return things -> {};
        }

        @Bean
        BiConsumer<ThingHappened, Object> recordThingWithHeaders() {
            return (thing, headers) -> {};
        }

        @Bean
        Function<ThingHappened, OutgoingEvent> describeThing() {
            return thing ->
                    new OutgoingEvent("test.thing.described.v1", thing.thingId().toString(), Map.of());
        }

        @Bean
        Function<ThingHappened, String> nameThing() {
            return thing -> thing.thingId().toString();
        }

        @Bean
        Consumer<String> recordThingAsText() {
            return text -> {};
        }

        @Bean
        Consumer<Message<byte[]>> recordThingAsBytes() {
            return message -> {};
        }

        /** A transaction manager of another resource than the DataSource, as a JTA one is. */
        @Bean
        @ConditionalOnBooleanProperty("test.other-transaction-manager")
        PlatformTransactionManager otherTransactionManager() {
            return new ResourcelessTransactionManager();
        }
    }

    @Test
    void aCorrectDefinitionStarts() {
        try (ConfigurableApplicationContext context = start("idempotencyGuard|recordThing")) {
            assertThat(context.getBean(GuardInstaller.class).bindings())
                    .singleElement()
                    .satisfies(binding -> {
                        assertThat(binding.bindingName()).isEqualTo("idempotencyGuardrecordThing-in-0");
                        assertThat(binding.payloadTypes().eventNames()).containsExactly(ThingHappened.NAME);
                    });
        }
    }

    @Test
    void theGuardMustComeFirst() {
        assertThat(startupFailure("recordThing|idempotencyGuard"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("composes idempotencyGuard after recordThing, where no transaction holds it")
                .hasMessageContaining("spring.cloud.function.definition=idempotencyGuard|recordThing");
    }

    @Test
    @ExtendWith(OutputCaptureExtension.class)
    void aRefusalIsReportedAsBootsDescriptionAndActionNotAStackTrace(CapturedOutput output) {
        assertThat(startupFailure("recordThing|idempotencyGuard")).isInstanceOf(StartupRefusal.class);

        assertThat(output.getAll())
                .contains("APPLICATION FAILED TO START")
                .containsPattern("(?m)Description:\\s+'recordThing\\|idempotencyGuard' composes idempotencyGuard after"
                        + " recordThing, where no transaction holds it\\.\\s+Action:\\s+Put it first:"
                        + " spring.cloud.function.definition=idempotencyGuard\\|recordThing\\s*$");
    }

    @Test
    void theGuardMustProtectSomething() {
        assertThat(startupFailure("idempotencyGuard"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("followed by the business function it protects");
    }

    @Test
    void aReactiveBusinessFunctionCannotBeProtected() {
        assertThat(startupFailure("idempotencyGuard|recordThingsReactively"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("a reactive function");
    }

    @Test
    void aBusinessFunctionThatIsNotAConsumerOrFunctionCannotBeProtected() {
        assertThat(startupFailure("idempotencyGuard|recordThingWithHeaders"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("cannot be protected")
                .hasMessageContaining("Declare it as a java.util.function.Consumer or Function @Bean");
    }

    @Test
    void aFunctionOfAListNeedsABatchBinding() {
        assertThat(startupFailure("idempotencyGuard|recordThingBatches"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("composes a function of a list of payloads, but binding"
                        + " idempotencyGuardrecordThingBatches-in-0 does not deliver batches")
                .hasMessageContaining("consumer.batch-mode=true");
    }

    @Test
    void aBatchBindingTakesAConsumerOfOneEventButNotAFunctionOfOne() {
        try (ConfigurableApplicationContext context = start(
                "idempotencyGuard|recordThing",
                "spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.batch-mode=true")) {
            assertThat(context.getBean(GuardInstaller.class).bindings())
                    .singleElement()
                    .satisfies(binding -> {
                        assertThat(binding.batch()).isTrue();
                        assertThat(binding.oneEventPerCall()).isTrue();
                    });
        }
        assertThat(startupFailure(
                        "idempotencyGuard|describeThing",
                        "spring.cloud.stream.bindings.idempotencyGuarddescribeThing-in-0.consumer.batch-mode=true"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("Binding idempotencyGuarddescribeThing-in-0 delivers batches (batch-mode), but"
                        + " 'idempotencyGuard|describeThing' composes a function of one payload")
                .hasMessageContaining("Take a List of payloads, or compose a single Consumer");
    }

    @Test
    void aGuardedFunctionReturnsEventsForTheOutboxNotAnOutputSentBeforeTheCommit() {
        assertThat(startupFailure("idempotencyGuard|nameThing"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("'idempotencyGuard|nameThing' ends with 'nameThing', a function that returns"
                        + " java.lang.String")
                .hasMessageContaining("Return an OutgoingEvent (or a List<OutgoingEvent>, or null for none), or make it"
                        + " a Consumer that emits with Outbox.emit");
    }

    @Test
    void theGuardNeedsADataSource() {
        assertThat(startupFailure(
                        "idempotencyGuard|recordThing",
                        "spring.autoconfigure.exclude=" + DataSourceAutoConfiguration.class.getName()))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("needs the service's DataSource")
                .hasMessageContaining("spring.datasource.url");
    }

    @Test
    void theGuardNeedsATransactionManager() {
        assertThat(startupFailure(
                        "idempotencyGuard|recordThing",
                        "spring.autoconfigure.exclude="
                                + DataSourceTransactionManagerAutoConfiguration.class.getName()))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("needs a transaction manager");
    }

    @Test
    void aTransactionManagerThatDoesNotManageTheDataSourceIsRefused() {
        assertThat(startupFailure("idempotencyGuard|recordThing", "test.other-transaction-manager=true"))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("does not bind the DataSource's connection to the thread")
                .hasMessageContaining("DataSourceTransactionManager");
    }

    @ParameterizedTest
    @ValueSource(strings = {"idempotencyGuard|recordThingAsText", "idempotencyGuard|recordThingAsBytes"})
    void aBusinessFunctionOfTextOrBytesIsRefused(String definition) {
        assertThat(startupFailure(definition))
                .isInstanceOf(IdempotencyException.class)
                .hasMessageContaining("the guard hands it the event's payload, a JSON object mapped to a type");
    }

    @ParameterizedTest
    @ValueSource(strings = {"user", "order", "table", "select", "authorization", "left"})
    void aReservedWordIsNotATableName(String tableName) {
        assertThat(startupFailure("idempotencyGuard|recordThing", "idempotency.table-name=" + tableName))
                .hasMessageContaining("idempotency.table-name '" + tableName + "' is a reserved word of PostgreSQL");
    }

    @Test
    void aTableNameTooLongForTheNamesDerivedFromItIsRefused() {
        String tableName = "processed_events_of_the_stock_reservation_serv";
        assertThat(startupFailure("idempotencyGuard|recordThing", "idempotency.table-name=" + tableName + "x"))
                .hasMessageContaining("at most 46 characters");
        try (ConfigurableApplicationContext context =
                start("idempotencyGuard|recordThing", "idempotency.table-name=" + tableName)) {
            assertThat(context.getBean(IdempotencyProperties.class).tableName()).hasSize(46);
        }
    }

    @Test
    void theTableNameMustBeAnIdentifier() {
        assertThat(startupFailure(
                        "idempotencyGuard|recordThing", "idempotency.table-name=processed_event; drop table x"))
                .hasMessageContaining("idempotency.table-name must be a lower-case SQL identifier");
    }

    @Test
    void aRetentionShorterThanTheReplayHorizonFails() {
        assertThat(startupFailure("idempotencyGuard|recordThing", "idempotency.retention=10d"))
                .hasMessageContaining(
                        "idempotency.retention (PT240H) is shorter than the replay horizon (PT504H: PT168H"
                                + " of producer replay + PT336H of dead-letter retention)")
                .hasMessageContaining("Keep processed ids at least PT504H");
    }

    @Test
    @ExtendWith(OutputCaptureExtension.class)
    void aShortRetentionIsReportedAsBootsFailureAnalysis(CapturedOutput output) {
        startupFailure("idempotencyGuard|recordThing", "idempotency.retention=10d");

        assertThat(output.getAll())
                .contains("APPLICATION FAILED TO START")
                .containsPattern("Description:\\s+Failed to bind properties under 'idempotency'")
                .contains("idempotency.retention (PT240H) is shorter than the replay horizon")
                .containsPattern("Action:\\s+Update your application's configuration");
    }

    @Test
    void aServiceThatDoesNotUseTheGuardNeedsNoDataSource() {
        try (ConfigurableApplicationContext context =
                start("recordThing", "spring.autoconfigure.exclude=" + DataSourceAutoConfiguration.class.getName())) {
            assertThat(context.getBean(GuardInstaller.class).bindings()).isEmpty();
        }
    }

    /**
     * A table of schema version 4 (its key without the event's name), left as it was by a service that migrates the
     * library's tables itself: every claim would fail (42703) and every message be dead-lettered.
     */
    @Test
    void aTableWithoutTheEventNameInItsKeyIsRefusedNamingTheMigration() {
        TestDatabase older = TestPostgres.newDatabase("schemav4");
        JdbcTemplate jdbc =
                new JdbcTemplate(new DriverManagerDataSource(older.jdbcUrl(), older.username(), older.password()));
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(jdbc.getDataSource());
        jdbc.execute("ALTER TABLE processed_event DROP CONSTRAINT processed_event_pkey,"
                + " ADD CONSTRAINT processed_event_pkey PRIMARY KEY (event_id, scope)");
        jdbc.execute("ALTER TABLE processed_event DROP COLUMN event_name");

        Throwable failure = Deployment.of(Service.class)
                .on(older)
                .with("spring.cloud.function.definition=idempotencyGuard|recordThing")
                .with("idempotency.migrate-with-flyway=false")
                // The service's own migrations, in a schema that holds the library's tables already.
                .with("spring.flyway.baseline-on-migrate=true", "spring.flyway.baseline-version=0")
                .startupFailure();

        assertThat(failure)
                .isInstanceOf(StartupRefusal.class)
                .hasMessageContaining("event_name")
                .hasMessageContaining("V5__claim_event_name.sql");
    }

    private static Throwable startupFailure(String definition, String... properties) {
        return deployment(definition, properties).startupFailure();
    }

    private static ConfigurableApplicationContext start(String definition, String... properties) {
        return deployment(definition, properties).start();
    }

    private static Deployment deployment(String definition, String... properties) {
        return Deployment.of(Service.class)
                .on(database)
                .with("spring.cloud.function.definition=" + definition)
                .with(properties);
    }
}
