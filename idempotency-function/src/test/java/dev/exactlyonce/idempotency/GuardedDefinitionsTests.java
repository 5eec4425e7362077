package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.test.GuardedDefinitions;
import org.junit.jupiter.api.Test;
import org.springframework.mock.env.MockEnvironment;

/** What tools (the test kit) read of the function definition, as the library reads it. */
class GuardedDefinitionsTests {

    @Test
    void theGuardedBindingsKeepTheNamesTheServiceGaveThem() {
        MockEnvironment environment = new MockEnvironment()
                .withProperty(
                        "spring.cloud.function.definition",
                        "idempotencyGuard|reserveStock;idempotencyGuard|trackOrder,notify;unguarded")
                .withProperty("spring.cloud.stream.function.bindings.idempotencyGuardreserveStock-in-0", "orders");

        assertThat(GuardedDefinitions.bindingNames(environment))
                .containsExactly("orders", "idempotencyGuardtrackOrdernotify-in-0");
        assertThat(GuardedDefinitions.businessFunctionNames(environment))
                .containsExactly("reserveStock", "trackOrder", "notify");
    }

    @Test
    void aDefinitionThatComposesTheGuardElsewhereThanFirstIsRefused() {
        MockEnvironment environment =
                new MockEnvironment().withProperty("spring.cloud.function.definition", "reserveStock|idempotencyGuard");

        assertThatExceptionOfType(IdempotencyException.class)
                .isThrownBy(() -> GuardedDefinitions.bindingNames(environment))
                .withMessageContaining("Put it first");
    }
}
