package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.Deployment;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.ArrayList;
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
public class KeyScopeAcrossDeploymentsTests {

    private static final String RECORD = "spring.cloud.function.definition=idempotencyGuard|recordThing";

    private static final String STORE = "spring.cloud.function.definition=idempotencyGuard|storeThing";

    private static final String FUNCTION_SCOPE = "idempotency.key-scope=function";

    private final EventEnvelope<ThingHappened> event = Things.thingHappened();

    private TestDatabase database;

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    @EnableTestBinder
    public static class Service {

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

    /**
     * A rolling deployment across a key-scope change: instances of the former version (service scope) and of the new
     * one (function scope, taking the service scope over) consume together, and copies reach both.
     */
    @Test
    void duringARollingDeploymentAcrossAScopeChangeOldAndNewInstancesSeeEachOthersClaims() {
        rollingDeployment();
    }

    /** The same, the new version consuming in batches: a batch is claimed under both scopes too. */
    @Test
    void duringARollingDeploymentAcrossAScopeChangeOldAndNewInstancesSeeEachOthersClaimsInBatches() {
        rollingDeployment("spring.cloud.stream.bindings.idempotencyGuardrecordThing-in-0.consumer.batch-mode=true");
    }

    private void rollingDeployment(String... updatedProperties) {
        List<String> updatedVersion = new ArrayList<>(List.of(
                RECORD, FUNCTION_SCOPE, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]="));
        updatedVersion.addAll(List.of(updatedProperties));
        try (ConfigurableApplicationContext former = start(RECORD);
                ConfigurableApplicationContext updated = start(updatedVersion.toArray(String[]::new))) {
            assertThat(updated.getBean(GuardInstaller.class).bindings())
                    .singleElement()
                    .satisfies(binding -> assertThat(binding.batch()).isEqualTo(updatedProperties.length > 0));
            EventEnvelope<ThingHappened> first = Things.thingHappened();
            deliver(former, first);
            deliver(updated, first);
            EventEnvelope<ThingHappened> second = Things.thingHappened();
            deliver(updated, second);
            deliver(former, second);

            assertThat(effects(first))
                    .as("claimed by an instance of the former version once the new one had started; then a copy to"
                            + " the new one")
                    .isEqualTo(1);
            assertThat(effects(second))
                    .as("claimed by an instance of the new version; then a copy to one of the former")
                    .isEqualTo(1);
        }
    }

    /**
     * Once an instance of the new version started, one of the former version cannot start again (the registry holds a
     * scope it does not account for): reference.md says so, and how to roll back.
     */
    @Test
    void anInstanceOfTheFormerVersionCannotStartAgainOnceTheNewOneStarted() {
        deployAndDeliver(RECORD);
        deployAndDeliver(
                RECORD, FUNCTION_SCOPE, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=");

        assertThat(startupFailure(RECORD)).hasMessageContaining("holds claims under scope(s) 'recordThing'");
        deployAndDeliver(RECORD, "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=recordThing");
        assertThat(effects())
                .as("rolled back, taking the new scope's claims over")
                .isEqualTo(1);
    }

    /**
     * Two bindings that both take the service scope over (both functions consume the event): neither claims under it,
     * or the first to claim an event would make it a duplicate for the other.
     */
    @Test
    void bindingsThatShareAFormerScopeDoNotClaimUnderIt() {
        try (ConfigurableApplicationContext updated = start(
                "spring.cloud.function.definition=idempotencyGuard|recordThing;idempotencyGuard|storeThing",
                FUNCTION_SCOPE,
                "idempotency.bindings.idempotencyGuardrecordThing-in-0.former-scopes[0]=",
                "idempotency.bindings.idempotencyGuardstoreThing-in-0.former-scopes[0]=")) {
            deliver(updated, this.event);

            assertThat(effects(this.event)).as("recordThing's and storeThing's").isEqualTo(2);
            assertThat(scopes()).containsExactly("recordThing", "storeThing");
        }
    }

    @Test
    void aFormerScopeThatAnotherBindingUsesIsRefused() {
        assertThat(startupFailure(
                        "spring.cloud.function.definition=idempotencyGuard|recordThing;idempotencyGuard|storeThing",
                        FUNCTION_SCOPE,
                        "idempotency.bindings.idempotencyGuardstoreThing-in-0.former-scopes[0]=recordThing"))
                .hasMessageContaining("idempotency.bindings.idempotencyGuardstoreThing-in-0.former-scopes lists"
                        + " 'recordThing', which a guarded binding of this service uses now");
    }

    @Test
    void settingsForABindingThatIsNotGuardedAreRefused() {
        assertThat(startupFailure(RECORD, "idempotency.bindings.idempotencyGuardstoreThing-in-0.scope=things"))
                .hasMessageContaining("idempotency.bindings.idempotencyGuardstoreThing-in-0 names no guarded binding;"
                        + " the guarded bindings are [idempotencyGuardrecordThing-in-0]");
    }

    private void deployAndDeliver(String... properties) {
        try (ConfigurableApplicationContext service = start(properties)) {
            deliver(service, this.event);
        }
    }

    /** Delivers the event to each guarded binding of the service. */
    private static void deliver(ConfigurableApplicationContext service, EventEnvelope<ThingHappened> event) {
        for (GuardedBinding binding : service.getBean(GuardInstaller.class).bindings()) {
            String destination =
                    service.getBean(BindingServiceProperties.class).getBindingDestination(binding.bindingName());
            service.getBean(InputDestination.class)
                    .send(
                            MessageBuilder.withPayload(new EnvelopeCodec().encode(event))
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
        return effects(this.event);
    }

    private int effects(EventEnvelope<ThingHappened> event) {
        Integer count = jdbc().queryForObject(
                        "SELECT count(*) FROM thing_effect WHERE thing_id = ?",
                        Integer.class,
                        event.payload().thingId());
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
