package dev.exactlyonce.infra;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * A service run from its jar, as an operator runs it ({@code java -jar <service>/target/<service>-<version>.jar}),
 * with its output in {@code target/<service>-<n>.log}.
 */
final class ServiceProcess implements AutoCloseable {

    private static final Path SERVICES = Path.of(System.getProperty("services.dir", ".."));

    private static final String VERSION = System.getProperty("project.version", "0.1.0-SNAPSHOT");

    private static int started;

    private final String service;

    private final Process process;

    private final Path log;

    private ServiceProcess(String service, Process process, Path log) {
        this.service = service;
        this.process = process;
        this.log = log;
    }

    /** Starts the service with these command-line properties and waits until it has started. */
    static ServiceProcess start(String service, List<String> properties) {
        Path jar = SERVICES.resolve(service).resolve("target").resolve(service + "-" + VERSION + ".jar");
        if (!Files.isRegularFile(jar)) {
            throw new IllegalStateException(jar + " is missing: build it first (./mvnw package)");
        }
        Path log = Path.of("target", "%s-%d.log".formatted(service, ++started));
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1",
                "-jar",
                jar.toString()));
        properties.forEach(property -> command.add("--" + property));
        try {
            Files.createDirectories(log.getParent());
            Process process = new ProcessBuilder(command)
                    .redirectErrorStream(true)
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
    void awaitLog(String regex, Duration limit) {
        Pattern pattern = Pattern.compile(regex);
        await().atMost(limit).until(() -> pattern.matcher(output()).find());
    }

    String output() {
        try {
            return Files.exists(this.log) ? Files.readString(this.log, UTF_8) : "";
        } catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
    }

    /** Stops the service the hard way, as {@code kill -9} would. */
    void kill() {
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
            await().atMost(Duration.ofSeconds(90)).until(() -> {
                if (!this.process.isAlive()) {
                    throw new IllegalStateException(this.service + " exited with " + this.process.exitValue()
                            + "; its log, " + this.log + ", ends with:\n" + tail());
                }
                return output().contains("Started ");
            });
        } catch (RuntimeException ex) {
            close();
            throw ex;
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
