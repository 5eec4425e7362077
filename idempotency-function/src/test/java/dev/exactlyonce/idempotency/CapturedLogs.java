package dev.exactlyonce.idempotency;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.util.List;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.slf4j.LoggerFactory;

/**
 * What a logger logs while each test runs, through Logback's {@link ListAppender}: a field of the test class,
 * {@code @RegisterExtension final CapturedLogs logs = CapturedLogs.all();}. The appender is attached before each test
 * and detached after it.
 */
public final class CapturedLogs implements BeforeEachCallback, AfterEachCallback {

    private final Logger logger;

    private final ListAppender<ILoggingEvent> appender = new ListAppender<>();

    private CapturedLogs(String loggerName) {
        this.logger = (Logger) LoggerFactory.getLogger(loggerName);
    }

    /** Every logger's events: the root logger's. */
    public static CapturedLogs all() {
        return new CapturedLogs(org.slf4j.Logger.ROOT_LOGGER_NAME);
    }

    /** The events of the logger of that class. */
    public static CapturedLogs of(Class<?> type) {
        return new CapturedLogs(type.getName());
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        this.appender.start();
        this.logger.addAppender(this.appender);
    }

    @Override
    public void afterEach(ExtensionContext context) {
        this.logger.detachAppender(this.appender);
        clear();
    }

    /** What was logged since the test began or since {@link #clear()}, in order. */
    public List<ILoggingEvent> events() {
        // The appender appends under its own lock, on whichever thread logs.
        synchronized (this.appender) {
            return List.copyOf(this.appender.list);
        }
    }

    /**
     * What the test's own thread logged: the test binder delivers on it, while the root logger also takes the lines of
     * the other contexts cached in the JVM, whose threads run on (relays, probes, schedulers).
     */
    public List<ILoggingEvent> eventsOfThisThread() {
        String thread = Thread.currentThread().getName();
        return events().stream()
                .filter(event -> event.getThreadName().equals(thread))
                .toList();
    }

    public void clear() {
        synchronized (this.appender) {
            this.appender.list.clear();
        }
    }
}
