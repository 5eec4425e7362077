package dev.exactlyonce.infra;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * Which database server the end-to-end shop runs on in this build: one per build, since each costs CI a minute and a
 * half, alternating from one commit to the next (by the parity of the commit's count of ancestors), both outside a git
 * checkout. {@code -Dshop.database=postgresql|mariadb|both} chooses.
 */
final class ShopDatabaseOfTheRun {

    static final String PROPERTY = "shop.database";

    private static final List<String> CHOICES = List.of("postgresql", "mariadb", "both");

    private ShopDatabaseOfTheRun() {}

    /** Why a build skips the shop on a server, and how to have it run there. */
    static final String SKIPPED = "This build runs the end-to-end shop on the other database server (one per build,"
            + " alternating from one commit to the next): -D" + PROPERTY + "=both runs both";

    /** Whether this build runs the shop on PostgreSQL. */
    static boolean postgresql() {
        return includes("postgresql");
    }

    /** Whether this build runs the shop on MariaDB. */
    static boolean mariadb() {
        return includes("mariadb");
    }

    private static boolean includes(String server) {
        String chosen = chosen();
        return chosen.equals("both") || chosen.equals(server);
    }

    private static String chosen() {
        String chosen = System.getProperty(PROPERTY, "").strip();
        if (!chosen.isEmpty()) {
            if (!CHOICES.contains(chosen)) {
                throw new IllegalArgumentException(
                        "-D%s takes one of %s, not '%s'".formatted(PROPERTY, CHOICES, chosen));
            }
            return chosen;
        }
        Long commits = commitCount();
        if (commits == null) {
            return "both";
        }
        return commits % 2 == 0 ? "postgresql" : "mariadb";
    }

    /** How many commits lead to the checkout's HEAD; {@code null} outside a git checkout, or without git. */
    private static @Nullable Long commitCount() {
        try {
            Process git = new ProcessBuilder("git", "rev-list", "--count", "HEAD")
                    .directory(Path.of(System.getProperty("services.dir", "..")).toFile())
                    .redirectErrorStream(true)
                    .start();
            String out = new String(git.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            if (!git.waitFor(10, TimeUnit.SECONDS) || git.exitValue() != 0) {
                return null;
            }
            return Long.parseLong(out);
        } catch (IOException | NumberFormatException ex) {
            return null;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
