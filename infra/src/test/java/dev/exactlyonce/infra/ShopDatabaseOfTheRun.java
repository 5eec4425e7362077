package dev.exactlyonce.infra;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which database server the end-to-end shop runs on in this build: one per build, since each costs CI a minute and a
 * half, chosen by the commit (the parity of the last digit of its id), so that commits share the two; both outside a
 * git checkout. {@code -Dshop.database=postgresql|mariadb|both} chooses.
 */
final class ShopDatabaseOfTheRun {

    static final String PROPERTY = "shop.database";

    /** Why a build skips the shop on a server, and how to have it run there. */
    static final String SKIPPED = "This build runs the end-to-end shop on the other database server (-D" + PROPERTY
            + ", or by the commit's id): -D" + PROPERTY + "=both runs both";

    private static final List<String> CHOICES = List.of("postgresql", "mariadb", "both");

    private static final Logger logger = LoggerFactory.getLogger(ShopDatabaseOfTheRun.class);

    private static final String CHOSEN = choose();

    private ShopDatabaseOfTheRun() {}

    /** Whether this build runs the shop on PostgreSQL. */
    static boolean postgresql() {
        return CHOSEN.equals("both") || CHOSEN.equals("postgresql");
    }

    /** Whether this build runs the shop on MariaDB. */
    static boolean mariadb() {
        return CHOSEN.equals("both") || CHOSEN.equals("mariadb");
    }

    private static String choose() {
        String chosen = System.getProperty(PROPERTY, "").strip();
        if (!chosen.isEmpty()) {
            if (!CHOICES.contains(chosen)) {
                throw new IllegalArgumentException(
                        "-D%s takes one of %s, not '%s'".formatted(PROPERTY, CHOICES, chosen));
            }
            logger.info("The end-to-end shop runs on {} (-D{})", chosen, PROPERTY);
            return chosen;
        }
        String commit = commit();
        if (commit == null) {
            logger.info("The end-to-end shop runs on both database servers (no git checkout to choose one by)");
            return "both";
        }
        chosen = Character.digit(commit.charAt(commit.length() - 1), 16) % 2 == 0 ? "postgresql" : "mariadb";
        logger.info("The end-to-end shop runs on {} (by commit {}; -D{}=both runs both)", chosen, commit, PROPERTY);
        return chosen;
    }

    /** The id of the checkout's HEAD; {@code null} outside a git checkout, or without git. */
    private static @Nullable String commit() {
        try {
            Path out = Files.createTempFile("shop-commit", ".txt");
            try {
                Process git = new ProcessBuilder("git", "rev-parse", "HEAD")
                        .directory(Path.of(System.getProperty("services.dir", ".."))
                                .toFile())
                        .redirectErrorStream(true)
                        .redirectOutput(out.toFile())
                        .start();
                if (!git.waitFor(10, TimeUnit.SECONDS)) {
                    git.destroyForcibly();
                    return null;
                }
                String id = Files.readString(out).strip();
                return git.exitValue() == 0 && id.matches("[0-9a-f]{40,64}") ? id : null;
            } finally {
                Files.deleteIfExists(out);
            }
        } catch (IOException ex) {
            return null;
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
