package dev.exactlyonce.idempotency;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The build runs its test classes in two JVMs at once, and other builds may run on the same machine. A class that
 * changes a server for every client (kills a cluster's node, lowers a broker's message size limit, makes a database server read-only) says so with
 * {@link Alone}, and runs while no other class that uses that server runs; every other class shares the servers that
 * all classes use. Locks on files in the temporary directory, held from before the class's {@code @BeforeAll} until
 * its context is closed (after Spring's {@code @DirtiesContext} closes the application). Registered for every class
 * by JUnit's extension auto-detection ({@code junit-platform.properties}).
 */
public final class SharedServers implements BeforeAllCallback {

    /** A server that test classes of this build and of others on this machine share. */
    public enum Server {
        /** The RabbitMQ node of {@code TestRabbit}: every class may use it. */
        RABBITMQ_NODE(true),
        /** The MariaDB server of {@code TestMariaDb}: every class may use it. */
        MARIADB(true),
        /** {@code infra/cluster.sh rabbitmq}'s nodes: only the classes that kill or cut them off use them. */
        RABBITMQ_CLUSTER(false),
        /** {@code infra/cluster.sh kafka}'s brokers: only the classes that kill or cut them off use them. */
        KAFKA_CLUSTER(false);

        private final boolean usedByEveryClass;

        Server(boolean usedByEveryClass) {
            this.usedByEveryClass = usedByEveryClass;
        }
    }

    /** The servers a test class changes for every client: it runs alone on each. */
    @Target(ElementType.TYPE)
    @Retention(RetentionPolicy.RUNTIME)
    @Inherited
    public @interface Alone {
        Server[] value();
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        if (context.getParent().flatMap(ExtensionContext::getTestClass).isPresent()) {
            return; // a @Nested class: its enclosing class holds the locks
        }
        Alone alone = context.getRequiredTestClass().getAnnotation(Alone.class);
        Set<Server> exclusive = EnumSet.noneOf(Server.class);
        if (alone != null) {
            exclusive.addAll(List.of(alone.value()));
        }
        ExtensionContext.Store store = context.getStore(ExtensionContext.Namespace.create(SharedServers.class));
        // In one order in every JVM, so that two classes never wait for each other.
        for (Server server : Server.values()) {
            if (exclusive.contains(server) || server.usedByEveryClass) {
                store.put(server, Held.lock(server, !exclusive.contains(server), context.getDisplayName()));
            }
        }
    }

    /** A lock held until JUnit closes the class's store. */
    private record Held(FileChannel channel, FileLock lock) implements AutoCloseable {

        static Held lock(Server server, boolean shared, String testClass) {
            Path file = Path.of(
                    System.getProperty("java.io.tmpdir"),
                    "exactlyonce-tests-" + server.name().toLowerCase(Locale.ROOT) + ".lock");
            String waiting = (shared
                            ? "%s waits for the class running alone on %s to finish (%s)"
                            : "%s waits to run alone on %s: other classes, of this build or another, use it (%s)")
                    .formatted(testClass, server, file);
            try {
                FileChannel channel = FileChannel.open(
                        file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
                // Its first byte is a turnstile that each class passes, and a class waiting to run alone holds: the
                // classes that come after it wait, instead of sharing the server on and on before it.
                try (FileLock turnstile = acquire(channel, 0, 1, false, waiting)) {
                    return new Held(channel, acquire(channel, 1, Long.MAX_VALUE - 1, shared, waiting));
                }
            } catch (IOException ex) {
                throw new UncheckedIOException("Could not lock " + file, ex);
            }
        }

        private static FileLock acquire(FileChannel channel, long position, long size, boolean shared, String waiting)
                throws IOException {
            FileLock lock = channel.tryLock(position, size, shared);
            if (lock != null) {
                return lock;
            }
            System.out.println(waiting);
            return channel.lock(position, size, shared);
        }

        @Override
        public void close() throws IOException {
            this.lock.release();
            this.channel.close();
        }
    }
}
