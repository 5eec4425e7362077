package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.IdempotencyException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.springframework.core.env.Environment;
import org.springframework.util.StringUtils;

/**
 * Reads {@code spring.cloud.function.definition}: definitions separated by {@code ;}, each a composition of
 * function names separated by {@code |} (or {@code ,}, which Spring Cloud Function accepts too).
 */
public final class FunctionDefinitions {

    public static final String PROPERTY = "spring.cloud.function.definition";

    /** The guard's function name, which a definition composes first. */
    public static final String GUARD = "idempotencyGuard";

    private FunctionDefinitions() {}

    public static List<String> parts(String definition) {
        return Arrays.stream(definition.split("[|,]"))
                .map(String::trim)
                .filter(StringUtils::hasText)
                .toList();
    }

    /** Whether any definition of the property names the guard (valid or not). */
    static boolean namesGuard(String property) {
        return Arrays.stream(property.split(";"))
                .anyMatch(definition -> parts(definition).contains(FunctionDefinitions.GUARD));
    }

    /**
     * The definitions of the property that compose the guard; throws {@link IdempotencyException} when one composes it
     * anywhere but first, or with nothing after it.
     */
    static List<List<String>> guardedDefinitions(String property) {
        List<List<String>> guarded = new ArrayList<>();
        for (String definition : property.split(";")) {
            List<String> parts = parts(definition);
            if (parts.contains(FunctionDefinitions.GUARD)) {
                checkComposition(definition.trim(), parts);
                guarded.add(parts);
            }
        }
        return guarded;
    }

    /** The names of the functions composed after the guard, in every definition of the property. */
    public static Set<String> guardedFunctionNames(String property) {
        Set<String> names = new LinkedHashSet<>();
        guardedDefinitions(property).forEach(parts -> names.addAll(parts.subList(1, parts.size())));
        return names;
    }

    /**
     * The input bindings of the guarded definitions: {@code <functions concatenated>-in-0}, or the name
     * {@code spring.cloud.stream.function.bindings.<that>} gives it.
     */
    public static Set<String> guardedBindingNames(Environment environment) {
        Set<String> names = new LinkedHashSet<>();
        for (List<String> parts : guardedDefinitions(environment.getProperty(PROPERTY, ""))) {
            String defaultName = String.join("", parts) + "-in-0";
            names.add(environment.getProperty("spring.cloud.stream.function.bindings." + defaultName, defaultName));
        }
        return names;
    }

    private static void checkComposition(String definition, List<String> parts) {
        if (!parts.get(0).equals(FunctionDefinitions.GUARD)) {
            throw new StartupRefusal(
                    "'%s' composes %s after %s, where no transaction holds it"
                            .formatted(definition, FunctionDefinitions.GUARD, parts.get(0)),
                    "Put it first: spring.cloud.function.definition=%s|%s"
                            .formatted(
                                    FunctionDefinitions.GUARD,
                                    String.join(
                                            "|",
                                            parts.stream()
                                                    .filter(part -> !part.equals(FunctionDefinitions.GUARD))
                                                    .toList())));
        }
        if (parts.size() == 1 || parts.lastIndexOf(FunctionDefinitions.GUARD) != 0) {
            throw new StartupRefusal(
                    "'%s' must compose %s once, followed by the business function it protects"
                            .formatted(definition, FunctionDefinitions.GUARD),
                    "Compose it as %s|yourFunction".formatted(FunctionDefinitions.GUARD));
        }
    }
}
