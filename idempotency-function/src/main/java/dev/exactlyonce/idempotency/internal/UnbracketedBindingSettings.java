package dev.exactlyonce.idempotency.internal;

import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.core.env.Environment;

/**
 * Refuses settings of the outbox relay's binding for a destination whose name has dots ({@code order.events}) written
 * without brackets: Boot reads them as settings of a binding named {@code order}. See docs/outbox.md, "The relay".
 */
public final class UnbracketedBindingSettings {

    private static final int SHOWN = 3;

    private UnbracketedBindingSettings() {}

    /** Refuses to go on when a property of the environment sets the destination's binding without brackets. */
    public static void refuse(Environment environment, String destination) {
        if (destination.indexOf('.') < 0) {
            return;
        }
        List<String> parts = List.of(destination.split("\\."));
        // Each property written so (where it comes from, when Boot knows), and the same in brackets.
        TreeMap<String, String> unbracketed = new TreeMap<>();
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            if (source instanceof IterableConfigurationPropertySource iterable) {
                iterable.stream().forEach(name -> {
                    int at = bindingAt(name, parts);
                    if (at > 0) {
                        unbracketed.put(described(source, name), bracketed(name, at, parts.size(), destination));
                    }
                });
            }
        }
        if (unbracketed.isEmpty()) {
            return;
        }
        List<String> names = List.copyOf(unbracketed.keySet());
        throw new StartupRefusal(
                ("The outbox relay publishes to %s through a binding of that name, and %s%s set%s it without brackets:"
                                + " Spring Boot reads a binding name with dots as a path and binds %s to a binding"
                                + " named %s, so that the relay would publish without %s")
                        .formatted(
                                destination,
                                String.join(", ", names.subList(0, Math.min(SHOWN, names.size()))),
                                names.size() > SHOWN ? " (and %d more)".formatted(names.size() - SHOWN) : "",
                                names.size() == 1 ? "s" : "",
                                names.size() == 1 ? "it" : "them",
                                parts.get(0),
                                names.size() == 1 ? "it" : "them"),
                ("Write the binding's name in brackets: %s (in YAML, the key \"[%s]\"; an environment variable cannot"
                                + " hold brackets: set it in a properties or YAML file, or in SPRING_APPLICATION_JSON)")
                        .formatted(unbracketed.firstEntry().getValue(), destination));
    }

    /**
     * Where the destination's first part is in {@code spring.cloud.stream[.<binder>].bindings.<its parts>.<setting>},
     * else 0; not in {@code spring.cloud.stream.function.bindings}, a map whose keys Boot takes whole.
     */
    private static int bindingAt(ConfigurationPropertyName name, List<String> parts) {
        int count = name.getNumberOfElements();
        if (count < 5 || !is(name, 0, "spring") || !is(name, 1, "cloud") || !is(name, 2, "stream")) {
            return 0;
        }
        for (int bindings = 3; bindings <= 4; bindings++) {
            // Its parts, then at least one element of the setting.
            if (count > bindings + parts.size() + 1
                    && is(name, bindings, "bindings")
                    && !(bindings == 4 && is(name, 3, "function"))
                    && matches(name, bindings + 1, parts)) {
                return bindings + 1;
            }
        }
        return 0;
    }

    private static boolean matches(ConfigurationPropertyName name, int from, List<String> parts) {
        for (int i = 0; i < parts.size(); i++) {
            if (!is(name, from + i, parts.get(i))) {
                return false;
            }
        }
        return true;
    }

    /** Compared as written, whatever the case: the dashed form drops {@code _}, which a destination may hold. */
    private static boolean is(ConfigurationPropertyName name, int element, String value) {
        return name.getElement(element, Form.ORIGINAL).toLowerCase(Locale.ROOT).equals(value.toLowerCase(Locale.ROOT));
    }

    private static String described(ConfigurationPropertySource source, ConfigurationPropertyName name) {
        ConfigurationProperty property = source.getConfigurationProperty(name);
        return property != null && property.getOrigin() != null
                ? "%s (%s)".formatted(name, property.getOrigin())
                : name.toString();
    }

    private static String bracketed(ConfigurationPropertyName name, int at, int parts, String destination) {
        return "%s[%s].%s".formatted(name.chop(at), destination, name.subName(at + parts));
    }
}
