package dev.exactlyonce.idempotency.test;

import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.springframework.core.env.Environment;

/** What the test kit reads of {@code spring.cloud.function.definition}. */
final class GuardedDefinitions {

    private static final String PROPERTY = "spring.cloud.function.definition";

    private static final String GUARD = "idempotencyGuard";

    private GuardedDefinitions() {}

    /** The input bindings of the definitions that start with the guard: {@code <functions concatenated>-in-0}. */
    static List<String> bindingNames(Environment environment) {
        return Arrays.stream(environment.getProperty(PROPERTY, "").split(";"))
                .map(String::trim)
                .filter(definition -> definition.startsWith(GUARD))
                .map(definition -> definition.replaceAll("[|,]", "") + "-in-0")
                .toList();
    }

    /** Every function the property names, but the guard. */
    static Set<String> functionNames(Environment environment) {
        return Arrays.stream(environment.getProperty(PROPERTY, "").split("[;|,]"))
                .map(String::trim)
                .filter(name -> !name.isEmpty() && !name.equals(GUARD))
                .collect(Collectors.toUnmodifiableSet());
    }
}
