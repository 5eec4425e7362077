package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.cloud.stream.binder.test.EnableTestBinder;
import org.springframework.cloud.stream.binder.test.InputDestination;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.support.MessageBuilder;

/**
 * A claim is found only under the scope it was recorded in. Each test deploys the service several times on one
 * database, changing what names its scope between deployments (the key scope, a function's name), and delivers the
 * same event after each: it is applied once, or the deployment refuses to start, saying what to declare.
 */
class KeyScopeAcrossDeploymentsTests {

    private static final String RECORD = "spring.cloud.function.definition=idempotencyGuard|recordThing";

    private static final String STORE = "spring.cloud.function.definition=idempotencyGuard|storeThing";

    private static final String FUNCTION_SCOPE = "idempotency.key-scope=function";

    private final EventEnvelope<ThingHappened> event = Things.thingHappened();

    private TestDatabase database;

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    @EnableTestBinder
    static class Service {

        @Bean
        Consumer<ThingHappened> recordThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }

        /** recordThing, renamed. */
        @Bean
        Consumer<ThingHappened> storeThing(JdbcTemplate jdbcTemplate) {
            return thing -> jdbcTemplate.update(
                    "INSERT INTO thing_effect (thing_id, amount) VALUES (?, ?)", thing.thingId(), thing.amount());
        }
    }

    @BeforeEach
    void newDatabase() {
        this.database = newDatabase("scopes");
    }

    /** A new database of the server these tests run on. */
    TestDatabase newDatabase(String purpose) {
        return TestPostgres.newDatabase(purpose);
    }

    @Test
    void switchingFromTheServiceScopeToTheFunctionScopeRefusesToStartUntilTheOldClaimsAreTakenOver() {
        deployAndDeliver(RECORD);

        assertThat(startupFailure(RECORD, FUNCTION_SCOPE))
                .hasMessageContaining("holds claims under scope(s) '' (the service scope), which no guarded binding"
                        + " uses any more (they use 'recordThing' for idempotencyGuardrecordThing-in-0)")
                .hasMessageContaining("idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=")
                .hasMessageContaining("former-scopes: [\"\"]")
                .hasMessageContaining("idempotency.retired-scopes[0]=");
        deployAndDeliver(
                RECORD, FUNCTION_SCOPE, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=");

        assertThat(effects())
                .as("the copy delivered after the switch found its claim")
                .isEqualTo(1);
        assertThat(scopes())
                .as("copied, not moved: an instance of the former version still running sees its claims")
                .containsExactly("", "recordThing");

        deployAndDeliver(RECORD, FUNCTION_SCOPE);

        assertThat(effects())
                .as("once the claims were copied, the former scope no longer needs declaring")
                .isEqualTo(1);
    }

    @Test
    void renamingAFunctionRefusesToStartUntilItTakesTheOldClaimsOver() {
        deployAndDeliver(RECORD, FUNCTION_SCOPE);

        assertThat(startupFailure(STORE, FUNCTION_SCOPE))
                .hasMessageContaining("holds claims under scope(s) 'recordThing', which no guarded binding uses any"
                        + " more (they use 'storeThing' for idempotencyGuardstoreThing-in-0)")
                .hasMessageContaining(
                        "idempotency.bindings.idempotencyGuardstoreThing-in-0.former-scopes[0]=recordThing");
        deployAndDeliver(
                STORE,
                FUNCTION_SCOPE,
                "idempotency.bindings.idempotencyGuardstoreThing-in-0.former-scopes[0]=recordThing");

        assertThat(effects()).isEqualTo(1);
        assertThat(scopes()).containsExactly("recordThing", "storeThing");
    }

    @Test
    void anExplicitScopeKeepsTheClaimsThroughARenameAndAKeyScopeChange() {
        deployAndDeliver(RECORD, "idempotency.bindings.idempotencyGuardrecordThing-in-0.scope=things");
        deployAndDeliver(STORE, FUNCTION_SCOPE, "idempotency.bindings.idempotencyGuardstoreThing-in-0.scope=things");

        assertThat(effects()).isEqualTo(1);
        assertThat(scopes()).containsExactly("things");
    }

    @Test
    void retiringAScopeIsHowReprocessingIsAskedFor() {
        deployAndDeliver(RECORD);
        deployAndDeliver(RECORD, FUNCTION_SCOPE, "idempotency.retired-scopes[0]=");

        assertThat(effects()).as("re-processing was declared").isEqualTo(2);
        deployAndDeliver(RECORD, FUNCTION_SCOPE);
        assertThat(effects()).isEqualTo(2);
    }

    @Test
    void aScopeInUseAgainAfterItsClaimsWereCopiedMustBeAccountedForAgainWhenItChanges() {
        deployAndDeliver(RECORD);
        deployAndDeliver(
                RECORD, FUNCTION_SCOPE, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=");
        deployAndDeliver(RECORD, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=recordThing");

        assertThat(startupFailure(RECORD, FUNCTION_SCOPE))
                .as("the service scope recorded claims of its own since its earlier ones were copied")
                .hasMessageContaining("holds claims under scope(s) '' (the service scope)");
        assertThat(effects()).isEqualTo(1);
    }

    @Test
    void settingsForABindingThatIsNotGuardedAreRefused() {
        assertThat(startupFailure(RECORD, "idempotency.bindings.idempotencyGuardstoreThing-in-0.scope=things"))
                .hasMessageContaining("idempotency.bindings.idempotencyGuardstoreThing-in-0 names no guarded binding;"
                        + " the guarded bindings are [idempotencyGuardrecordThing-in-0]");
    }

    private void deployAndDeliver(String... properties) {
        try (ConfigurableApplicationContext service = start(properties)) {
            String binding =
                    service.getBean(GuardedBindings.class).bindings().get(0).bindingName();
            String destination = service.getBean(BindingServiceProperties.class).getBindingDestination(binding);
            service.getBean(InputDestination.class)
                    .send(
                            MessageBuilder.withPayload(new EnvelopeCodec().encode(this.event))
                                    .build(),
                            destination);
        }
    }

    private Throwable startupFailure(String... properties) {
        return Deployment.of(Service.class).on(this.database).with(properties).startupFailure();
    }

    private ConfigurableApplicationContext start(String... properties) {
        return Deployment.of(Service.class).on(this.database).with(properties).start();
    }

    private int effects() {
        Integer count = jdbc().queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        this.event.payload().thingId());
        return count != null ? count : 0;
    }

    private List<String> scopes() {
        return jdbc().queryForList(
                        "SELECT scope FROM processed_event WHERE event_id = ? ORDER BY scope",
                        String.class,
                        this.event.eventId());
    }

    private JdbcTemplate jdbc() {
        return new JdbcTemplate(new org.springframework.jdbc.datasource.DriverManagerDataSource(
                this.database.jdbcUrl(), this.database.username(), this.database.password()));
    }
}
