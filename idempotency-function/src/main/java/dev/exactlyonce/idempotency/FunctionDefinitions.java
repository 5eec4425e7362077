package dev.exactlyonce.idempotency;

import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.springframework.util.StringUtils;

/**
 * Reads {@code spring.cloud.function.definition}: definitions separated by {@code ;}, each a composition of
 * function names separated by {@code |} (or {@code ,}, which Spring Cloud Function accepts too).
 */
final class FunctionDefinitions {

    static final String PROPERTY = "spring.cloud.function.definition";

    private FunctionDefinitions() {}

    /** The function names of one composition, in order. */
    static List<String> parts(String definition) {
        return Arrays.stream(definition.split("[|,]"))
                .map(String::trim)
                .filter(StringUtils::hasText)
                .toList();
    }

    /** The names of the functions composed after the guard, in every definition of the property. */
    static Set<String> guardedFunctionNames(String property) {
        Set<String> names = new LinkedHashSet<>();
        for (String definition : property.split(";")) {
            List<String> parts = parts(definition);
            int guard = parts.indexOf(IdempotencyGuard.NAME);
            if (guard >= 0) {
                names.addAll(parts.subList(guard + 1, parts.size()));
            }
        }
        names.remove(IdempotencyGuard.NAME);
        return names;
    }
}
