package dev.exactlyonce.console;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.springframework.stereotype.Component;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.json.JsonMapper;

/**
 * Every action taken through the console (who, when, what, on how many), appended to {@code console.audit-log} once the
 * service answered and before the console does, one JSON object a line, written through to the device, and shown
 * newest first. An entry that cannot be written is reported on the page.
 */
@Component
class AuditLog {

    /** The entries the page shows. */
    static final int SHOWN = 200;

    /**
     * An action.
     *
     * @param at when it was taken
     * @param user who took it
     * @param action what it was, such as {@code release}
     * @param target what it was taken on: the service, its instance and the row
     * @param count how many rows it changed
     */
    record Entry(Instant at, String user, String action, String target, int count) {}

    private static final JsonMapper json = JsonMapper.builder().build();

    private final Path file;

    AuditLog(ConsoleProperties properties) {
        this.file = properties.auditLog();
    }

    /** Appends the entry, flushed to the file's device, before the action is reported done. */
    synchronized void append(Entry entry) {
        try {
            Files.writeString(
                    this.file,
                    json.writeValueAsString(entry) + "\n",
                    UTF_8,
                    StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND,
                    StandardOpenOption.SYNC);
        } catch (IOException ex) {
            throw new UncheckedIOException("Could not write the audit log " + this.file, ex);
        }
    }

    /** The latest entries, newest first. */
    synchronized List<Entry> latest() {
        if (!Files.exists(this.file)) {
            return List.of();
        }
        try {
            List<String> lines = Files.readAllLines(this.file, UTF_8);
            List<Entry> entries = new ArrayList<>();
            for (String line : lines.subList(Math.max(0, lines.size() - SHOWN), lines.size())) {
                if (line.isBlank()) {
                    continue;
                }
                try {
                    entries.add(json.readValue(line, Entry.class));
                } catch (JacksonException ex) {
                    // A line cut short (the console stopped while writing it) is shown as such, not a broken page.
                    entries.add(new Entry(Instant.EPOCH, "?", "unreadable entry", line, 0));
                }
            }
            Collections.reverse(entries);
            return entries;
        } catch (IOException ex) {
            throw new UncheckedIOException("Could not read the audit log " + this.file, ex);
        }
    }
}
