package dev.exactlyonce.idempotency.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.exactlyonce.idempotency.test.KitTestApplication.KitHappened;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.cloud.function.context.FunctionRegistration;
import org.springframework.cloud.function.context.catalog.FunctionTypeUtils;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A guarded function the probe cannot wrap (a {@code FunctionRegistration}) would read 0 invocations whatever
 * happened: the start-up fails instead, naming it.
 */
class UnwatchedFunctionTests {

    @Test
    void aGuardedFunctionTheProbeCannotWatchFailsTheStartUp() {
        TestDatabase database = TestPostgres.newDatabase("kitunwatched");

        Throwable failure = catchThrowable(() -> new SpringApplicationBuilder(RegisteredFunctionService.class)
                .run(
                        "--spring.datasource.url=" + database.jdbcUrl(),
                        "--spring.datasource.username=" + database.username(),
                        "--spring.datasource.password=" + database.password(),
                        "--spring.cloud.function.definition=idempotencyGuard|registeredKit",
                        "--spring.cloud.stream.bindings.idempotencyGuardregisteredKit-in-0.destination=kits",
                        "--spring.cloud.stream.bindings.idempotencyGuardregisteredKit-in-0.group=kit-tests")
                .close());

        assertThat(failure)
                .isNotNull()
                .hasStackTraceContaining("The test kit's BusinessFunctionProbe cannot watch [registeredKit]");
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    @EnableIdempotencyTestKit
    static class RegisteredFunctionService {

        @Bean
        FunctionRegistration<Function<KitHappened, String>> registeredKit() {
            return new FunctionRegistration<Function<KitHappened, String>>(kit -> "done", "registeredKit")
                    .type(FunctionTypeUtils.functionType(KitHappened.class, String.class));
        }
    }
}
