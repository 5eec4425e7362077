package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.core.env.Environment;

/**
 * Refuses settings of a relay binding whose name has dots (a destination such as {@code order.events}) written without
 * brackets: Spring Boot reads {@code spring.cloud.stream.rabbit.bindings.order.events.producer.declare-exchange} as a
 * setting of a binding named {@code order}, and the relay's binding never gets it. See docs/outbox.md ("How it
 * publishes").
 */
final class UnbracketedBindingSettings {

    private static final int SHOWN = 3;

    private UnbracketedBindingSettings() {}

    /** Refuses to go on when a property of the environment sets the binding without brackets. */
    static void refuse(Environment environment, String binding) {
        if (binding.indexOf('.') < 0) {
            return;
        }
        List<String> parts = List.of(binding.toLowerCase(Locale.ROOT).split("\\."));
        // Each property written so, and the same in brackets.
        TreeMap<String, String> unbracketed = new TreeMap<>();
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            if (source instanceof IterableConfigurationPropertySource iterable) {
                iterable.stream().forEach(name -> {
                    int at = bindingAt(name, parts);
                    if (at > 0) {
                        unbracketed.put(name.toString(), bracketed(name, at, parts.size(), binding));
                    }
                });
            }
        }
        if (unbracketed.isEmpty()) {
            return;
        }
        List<String> names = new ArrayList<>(unbracketed.keySet());
        throw new StartupRefusal(
                ("The outbox relay publishes through binding %s, and %s%s set%s it without brackets: Spring Boot"
                                + " reads a binding name with dots as a path and binds %s to a binding named %s, so"
                                + " that the relay would publish without %s")
                        .formatted(
                                binding,
                                String.join(", ", names.subList(0, Math.min(SHOWN, names.size()))),
                                names.size() > SHOWN ? " (and %d more)".formatted(names.size() - SHOWN) : "",
                                names.size() == 1 ? "s" : "",
                                names.size() == 1 ? "it" : "them",
                                parts.get(0),
                                names.size() == 1 ? "it" : "them"),
                "Write the binding's name in brackets: %s (in YAML, the key \"[%s]\")"
                        .formatted(unbracketed.firstEntry().getValue(), binding));
    }

    /**
     * Where the binding's first part is in {@code spring.cloud.stream[.<binder>].bindings.<its parts>.<setting>}, the
     * name taken as several elements (in brackets, it is one); 0 when the name is not such a setting.
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

    private static boolean is(ConfigurationPropertyName name, int element, String value) {
        return name.getElement(element, Form.DASHED).equalsIgnoreCase(value);
    }

    private static String bracketed(ConfigurationPropertyName name, int at, int parts, String binding) {
        StringBuilder bracketed = new StringBuilder();
        for (int i = 0; i < name.getNumberOfElements(); i++) {
            if (i == at) {
                bracketed.append('[').append(binding).append(']');
                i += parts - 1;
            } else {
                bracketed.append(bracketed.isEmpty() ? "" : ".").append(name.getElement(i, Form.ORIGINAL));
            }
        }
        return bracketed.toString();
    }
}
