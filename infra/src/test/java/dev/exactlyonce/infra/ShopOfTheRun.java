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
 * Which of its three set-ups the end-to-end shop runs in this build: PostgreSQL and RabbitMQ, MariaDB and RabbitMQ, or
 * PostgreSQL and Kafka. One per build, since each costs CI a minute and a half, chosen by the commit (the last digit of
 * its id, modulo 3), so that commits share the three; all of them outside a git checkout.
 * {@code -Dshop.run=postgresql|mariadb|kafka|all} chooses.
 */
final class ShopOfTheRun {

    static final String PROPERTY = "shop.run";

    /** Why a build skips the shop on a set-up, and how to have it run there. */
    static final String SKIPPED = "This build runs the end-to-end shop on another set-up (-D" + PROPERTY
            + ", or by the commit's id): -D" + PROPERTY + "=all runs the three";

    /** The set-ups, in the order the commit's digit picks them. */
    private static final List<String> SETUPS = List.of("postgresql", "mariadb", "kafka");

    private static final Logger logger = LoggerFactory.getLogger(ShopOfTheRun.class);

    private static final String CHOSEN = choose();

    private ShopOfTheRun() {}

    /** Whether this build runs the shop on PostgreSQL and RabbitMQ. */
    static boolean postgresql() {
        return chosen("postgresql");
    }

    /** Whether this build runs the shop on MariaDB and RabbitMQ. */
    static boolean mariadb() {
        return chosen("mariadb");
    }

    /** Whether this build runs the shop on PostgreSQL and Kafka. */
    static boolean kafka() {
        return chosen("kafka");
    }

    private static boolean chosen(String setup) {
        return CHOSEN.equals("all") || CHOSEN.equals(setup);
    }

    private static String choose() {
        String chosen = System.getProperty(PROPERTY, "").strip();
        if (!chosen.isEmpty()) {
            if (!chosen.equals("all") && !SETUPS.contains(chosen)) {
                throw new IllegalArgumentException(
                        "-D%s takes one of %s or all, not '%s'".formatted(PROPERTY, SETUPS, chosen));
            }
            logger.info("The end-to-end shop runs on {} (-D{})", chosen, PROPERTY);
            return chosen;
        }
        String commit = commit();
        if (commit == null) {
            logger.info("The end-to-end shop runs on its three set-ups (no git checkout to choose one by)");
            return "all";
        }
        chosen = SETUPS.get(Character.digit(commit.charAt(commit.length() - 1), 16) % SETUPS.size());
        logger.info("The end-to-end shop runs on {} (by commit {}; -D{}=all runs the three)", chosen, commit, PROPERTY);
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
