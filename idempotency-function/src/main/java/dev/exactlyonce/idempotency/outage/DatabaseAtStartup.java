package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.DatabaseProbe;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.util.backoff.BackOffExecution;

/**
 * Waits at start-up for each DataSource's database, for {@code idempotency.outage.startup-wait} with the probe's
 * back-off, rather than failing at the first refused connection. Before the pool starts, it bounds the login: one stuck
 * on a silent network would leave the pool empty for good. See docs/operations.md, "When things go wrong".
 */
public final class DatabaseAtStartup implements BeanPostProcessor {

    private static final Logger logger = LoggerFactory.getLogger(DatabaseAtStartup.class);

    private final IdempotencyProperties.Outage settings;

    public DatabaseAtStartup(IdempotencyProperties.Outage settings) {
        this.settings = settings;
    }

    @Override
    public Object postProcessBeforeInitialization(Object bean, String beanName) {
        if (bean instanceof DataSource dataSource) {
            DatabaseProbe.boundLogin(dataSource, this.settings.socketTimeout());
        }
        return bean;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        if (bean instanceof DataSource dataSource) {
            awaitAnswer(dataSource, beanName);
        }
        return bean;
    }

    private void awaitAnswer(DataSource dataSource, String beanName) {
        long start = System.nanoTime();
        BackOffExecution intervals =
                ConsumptionHalt.probeIntervals(this.settings.probeInitialInterval(), this.settings);
        while (true) {
            Duration interval = Duration.ofMillis(intervals.nextBackOff());
            SQLException failure;
            try (Connection connection = dataSource.getConnection()) {
                return;
            } catch (SQLException ex) {
                failure = ex;
            }
            Duration waited = Duration.ofNanos(System.nanoTime() - start);
            if (waited.plus(interval).compareTo(this.settings.startupWait()) > 0) {
                throw new StartupRefusal(
                        "The database of DataSource '%s' did not answer within %s (%s): start-up stops"
                                .formatted(beanName, this.settings.startupWait(), failure.getMessage()),
                        "Start the database, or let the service wait longer (idempotency.outage.startup-wait)",
                        failure);
            }
            logger.warn(
                    "Waiting for the database of DataSource '{}' before starting ({}); next try in {}, waited {} of {}",
                    beanName,
                    failure.getMessage(),
                    interval,
                    waited.withNanos(0),
                    this.settings.startupWait());
            try {
                // Start-up itself waits: nothing may use the DataSource before the database answers.
                Thread.sleep(interval.toMillis());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new IdempotencyException("Interrupted while waiting for the database at start-up", ex);
            }
        }
    }
}
