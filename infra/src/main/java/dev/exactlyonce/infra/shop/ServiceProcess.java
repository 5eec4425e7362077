package dev.exactlyonce.infra.shop;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import tools.jackson.databind.json.JsonMapper;

/**
 * A service run from its jar, as an operator runs it ({@code java -jar <service>/target/<service>-<version>.jar}),
 * with its output in a log file.
 */
public final class ServiceProcess implements AutoCloseable {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final String service;

    private final Process process;

    private final Path log;

    private ServiceProcess(String service, Process process, Path log) {
        this.service = service;
        this.process = process;
        this.log = log;
    }

    /** The executable jar of a service: {@code <dir>/<service>/target/<service>-<version>.jar}. */
    public static Path jar(Path servicesDir, String service) {
        Path target = servicesDir.resolve(service).resolve("target");
        try (Stream<Path> files = Files.exists(target) ? Files.list(target) : Stream.empty()) {
            return files.filter(file -> {
                        String name = file.getFileName().toString();
                        return name.startsWith(service + "-")
                                && name.endsWith(".jar")
                                && !name.endsWith("-plain.jar")
                                && !name.endsWith("-sources.jar");
                    })
                    .findFirst()
                    .orElseThrow(() -> new IllegalStateException(
                            target + " has no " + service + " jar: build it first (./mvnw package -DskipTests)"));
        } catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * Starts the service's jar with these properties ({@code name=value}) and waits until it has started. They reach
     * it in its environment ({@code SPRING_APPLICATION_JSON}, which Spring Boot reads above the environment's other
     * variables and below the command line), not on its command line, which every user of the machine can read: they
     * hold its passwords.
     */
    public static ServiceProcess start(Path jar, String service, List<String> properties, Path log) {
        if (!Files.isRegularFile(jar)) {
            throw new IllegalStateException(jar + " is missing: build it first (./mvnw package -DskipTests)");
        }
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1",
                "-Xss512k",
                "-jar",
                jar.toString()));
        Map<String, String> settings = new LinkedHashMap<>();
        for (String property : properties) {
            int equals = property.indexOf('=');
            if (equals < 1) {
                throw new IllegalArgumentException("Not a property, name=value: " + property);
            }
            settings.put(property.substring(0, equals), property.substring(equals + 1));
        }
        try {
            Files.createDirectories(log.toAbsolutePath().getParent());
            ProcessBuilder builder = new ProcessBuilder(command);
            builder.environment().put("SPRING_APPLICATION_JSON", JSON.writeValueAsString(settings));
            Process process = builder.redirectErrorStream(true)
                    .redirectOutput(log.toFile())
                    .start();
            ServiceProcess running = new ServiceProcess(service, process, log);
            running.awaitStarted();
            return running;
        } catch (IOException ex) {
            throw new UncheckedIOException("Could not start " + service, ex);
        }
    }

    /** Waits until the log has a line matching the pattern. */
    public void awaitLog(String regex, Duration limit) {
        Pattern pattern = Pattern.compile(regex);
        await(() -> pattern.matcher(output()).find(), limit, "a log line matching " + regex);
    }

    /**
     * The process's command line as any user of the machine reads it ({@code ps}, {@code /proc/<pid>/cmdline}), or
     * {@code ""} where the system does not tell.
     */
    public String commandLine() {
        return this.process.info().commandLine().orElse("");
    }

    /** What the service has logged so far. */
    public String output() {
        try {
            return Files.exists(this.log) ? Files.readString(this.log, UTF_8) : "";
        } catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
    }

    /** Stops the service the hard way, as {@code kill -9} does: no shutdown hook, no graceful stop. */
    public void kill() {
        this.process.destroyForcibly();
        waitForExit();
    }

    @Override
    public void close() {
        if (this.process.isAlive()) {
            this.process.destroy();
            waitForExit();
        }
    }

    private void awaitStarted() {
        try {
            await(
                    () -> {
                        if (!this.process.isAlive()) {
                            throw new IllegalStateException(this.service + " exited with " + this.process.exitValue()
                                    + "; its log, " + this.log + ", ends with:\n" + tail());
                        }
                        return output().contains("Started ");
                    },
                    Duration.ofSeconds(120),
                    this.service + " to start");
        } catch (RuntimeException ex) {
            close();
            throw ex;
        }
    }

    private void await(BooleanSupplier condition, Duration limit, String what) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(
                        "Waited " + limit + " for " + what + "; " + this.log + " ends with:\n" + tail());
            }
            try {
                TimeUnit.MILLISECONDS.sleep(200);
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("Interrupted while waiting for " + what, ex);
            }
        }
    }

    private String tail() {
        List<String> lines = output().lines().toList();
        return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    }

    private void waitForExit() {
        try {
            this.process.waitFor();
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }
}
