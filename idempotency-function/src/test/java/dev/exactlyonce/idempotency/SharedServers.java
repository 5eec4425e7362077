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
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestInstanceFactoryContext;
import org.junit.jupiter.api.extension.TestInstancePreConstructCallback;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The build runs its test classes in two JVMs at once, and other builds may run on the same machine. A class that
 * changes a server for every client (kills a cluster's node, lowers the broker's message size limit, makes MariaDB
 * read-only) says so with {@link Alone}: it runs while no other class that uses that server runs, and every other
 * class shares the servers all classes use. File locks in the temporary directory, taken before the class's context
 * starts and released once JUnit is done with the class (after {@code @DirtiesContext} closed its context). Registered
 * for every class by JUnit's extension auto-detection ({@code junit-platform.properties}).
 */
public final class SharedServers implements BeforeAllCallback, TestInstancePreConstructCallback {

    private static final Logger logger = LoggerFactory.getLogger(SharedServers.class);

    /** How long a class waits for a server before it fails, saying who holds it. */
    private static final Duration LONGEST_WAIT = Duration.ofMinutes(15);

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

    /** The servers a test class changes for every client: it runs alone on each. Top-level classes only. */
    @Target(ElementType.TYPE)
    @Retention(RetentionPolicy.RUNTIME)
    @Inherited
    public @interface Alone {
        Server[] value();
    }

    /** A class whose one instance is made before its {@code @BeforeAll} (and its context with it) locks first. */
    @Override
    public void preConstructTestInstance(TestInstanceFactoryContext factory, ExtensionContext context) {
        if (context.getTestInstanceLifecycle().orElse(null) == TestInstance.Lifecycle.PER_CLASS) {
            lock(context);
        }
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        lock(context);
    }

    private static void lock(ExtensionContext context) {
        Class<?> testClass = context.getRequiredTestClass();
        if (context.getParent().flatMap(ExtensionContext::getTestClass).isPresent()) {
            if (testClass.isAnnotationPresent(Alone.class)
                    && !testClass.getEnclosingClass().isAnnotationPresent(Alone.class)) {
                throw new ExtensionConfigurationException(
                        "@SharedServers.Alone goes on the top-level class of " + testClass.getName());
            }
            return; // a @Nested class: its enclosing class holds the locks
        }
        Alone alone = testClass.getAnnotation(Alone.class);
        Set<Server> exclusive = EnumSet.noneOf(Server.class);
        if (alone != null) {
            exclusive.addAll(List.of(alone.value()));
        }
        ExtensionContext.Store store = context.getStore(ExtensionContext.Namespace.create(SharedServers.class));
        // In one order in every JVM, so that two classes never wait for each other.
        for (Server server : Server.values()) {
            if (exclusive.contains(server) || server.usedByEveryClass) {
                store.computeIfAbsent(
                        server, key -> Held.lock(key, !exclusive.contains(key), testClass.getSimpleName()), Held.class);
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
            FileChannel channel;
            try {
                channel = FileChannel.open(
                        file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
            } catch (IOException ex) {
                throw new UncheckedIOException("Could not open " + file, ex);
            }
            try {
                // Its first byte is a turnstile that each class passes, and a class waiting to run alone holds: the
                // classes that come after it wait, instead of sharing the server on and on before it.
                try (FileLock turnstile = acquire(channel, 0, 1, false, waiting)) {
                    return new Held(channel, acquire(channel, 1, Long.MAX_VALUE - 1, shared, waiting));
                }
            } catch (IOException ex) {
                throw closing(channel, new UncheckedIOException("Could not lock " + file, ex));
            } catch (RuntimeException ex) {
                throw closing(channel, ex);
            }
        }

        /** Closes the channel: left open, it would drop this JVM's later locks on the file once it is collected. */
        private static RuntimeException closing(FileChannel channel, RuntimeException failure) {
            try {
                channel.close();
            } catch (IOException ex) {
                failure.addSuppressed(ex);
            }
            return failure;
        }

        private static FileLock acquire(FileChannel channel, long position, long size, boolean shared, String waiting)
                throws IOException {
            FileLock lock = channel.tryLock(position, size, shared);
            if (lock != null) {
                return lock;
            }
            logger.info(waiting); // at the turnstile, or past it
            long deadline = System.nanoTime() + LONGEST_WAIT.toNanos();
            while (lock == null) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(
                            "%s; gave up after %s: is a test of another build stuck?".formatted(waiting, LONGEST_WAIT));
                }
                LockSupport.parkNanos(Duration.ofMillis(100).toNanos());
                lock = channel.tryLock(position, size, shared);
            }
            return lock;
        }

        @Override
        public void close() throws IOException {
            try {
                this.lock.release();
            } finally {
                this.channel.close();
            }
        }
    }
}
