package dev.exactlyonce.idempotency.test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * The environment's description of a cluster of infra/cluster.sh: its nodes' addresses, and the command that acts on
 * them. Reading it fails nothing (a test class holds it in a static field, and is skipped where the environment names
 * no cluster); using it fails, saying what to set, when the environment names none.
 */
final class ClusterControl {

    private final String engine;

    private final String addressesVariable;

    private final @Nullable String addresses;

    private final @Nullable String control;

    ClusterControl(String engine, String addressesVariable, String controlVariable) {
        this.engine = engine;
        this.addressesVariable = addressesVariable;
        this.addresses = System.getenv(addressesVariable);
        this.control = System.getenv(controlVariable);
    }

    private String required(@Nullable String value) {
        if (value == null || value.isBlank()) {
            String script = "infra/cluster.sh " + this.engine.toLowerCase(Locale.ROOT);
            throw new IllegalStateException(
                    "No %s cluster: start one (%s up, as root) and set %s (%s addresses) and %s_CONTROL (%s)"
                            .formatted(
                                    this.engine,
                                    script,
                                    this.addressesVariable,
                                    script,
                                    this.addressesVariable,
                                    script));
        }
        return value;
    }

    String addresses() {
        return required(this.addresses);
    }

    String control(String... arguments) {
        List<String> command =
                new ArrayList<>(List.of(required(this.control).trim().split("\\s+")));
        command.addAll(List.of(arguments));
        try {
            Process process =
                    new ProcessBuilder(command).redirectErrorStream(true).start();
            String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (process.waitFor() != 0) {
                throw new IllegalStateException(String.join(" ", command) + ": " + output.strip());
            }
            return output;
        } catch (IOException ex) {
            throw new IllegalStateException(String.join(" ", command) + ": " + ex.getMessage(), ex);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + String.join(" ", command), ex);
        }
    }
}
