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

    /**
     * The names of the functions composed after the guard, in every definition of the property.
     *
     * @throws IdempotencyException when a definition composes the guard anywhere but first, or with nothing after it
     */
    static Set<String> guardedFunctionNames(String property) {
        Set<String> names = new LinkedHashSet<>();
        for (String definition : property.split(";")) {
            List<String> parts = parts(definition);
            if (parts.contains(IdempotencyGuard.NAME)) {
                checkComposition(definition.trim(), parts);
                names.addAll(parts.subList(1, parts.size()));
            }
        }
        return names;
    }

    private static void checkComposition(String definition, List<String> parts) {
        if (!parts.get(0).equals(IdempotencyGuard.NAME)) {
            throw new IdempotencyException(("'%s' composes %s after %s, where no transaction holds it. Put it"
                            + " first: spring.cloud.function.definition=%s|%s")
                    .formatted(
                            definition,
                            IdempotencyGuard.NAME,
                            parts.get(0),
                            IdempotencyGuard.NAME,
                            String.join(
                                    "|",
                                    parts.stream()
                                            .filter(part -> !part.equals(IdempotencyGuard.NAME))
                                            .toList())));
        }
        if (parts.size() == 1 || parts.lastIndexOf(IdempotencyGuard.NAME) != 0) {
            throw new IdempotencyException(
                    "'%s' must compose %s once, followed by the business function it protects: %s|yourFunction"
                            .formatted(definition, IdempotencyGuard.NAME, IdempotencyGuard.NAME));
        }
    }
}
