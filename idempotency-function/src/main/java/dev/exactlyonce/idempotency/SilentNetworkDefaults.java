package dev.exactlyonce.idempotency;

import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.config.BeanPostProcessor;

/**
 * Gives a PostgreSQL DataSource pooled by HikariCP the driver settings that notice a silent network within seconds,
 * unless the service set them (in the URL or the pool's data source properties), before the pool opens its first
 * connection: {@code socketTimeout} ({@code idempotency.outage.socket-timeout}) and {@code tcpKeepAlive}. Without
 * them, pgjdbc waits for an answer without limit, and a connection whose packets are dropped without a reset blocks
 * its statement, and the consumer thread, for the kernel's TCP timeout; with them, the statement fails with an I/O
 * error, which halts consumption as an outage.
 */
final class SilentNetworkDefaults implements BeanPostProcessor {

    private static final Logger logger = LoggerFactory.getLogger(SilentNetworkDefaults.class);

    private final Duration socketTimeout;

    SilentNetworkDefaults(Duration socketTimeout) {
        this.socketTimeout = socketTimeout;
    }

    @Override
    public Object postProcessBeforeInitialization(Object bean, String beanName) {
        if (bean instanceof HikariDataSource pool
                && pool.getJdbcUrl() != null
                && pool.getJdbcUrl().startsWith("jdbc:postgresql:")) {
            if (!this.socketTimeout.isZero() && !isSet(pool, "socketTimeout")) {
                pool.addDataSourceProperty(
                        "socketTimeout", String.valueOf(Math.max(1, this.socketTimeout.toSeconds())));
                logger.debug(
                        "DataSource '{}': socketTimeout={}s (idempotency.outage.socket-timeout)",
                        beanName,
                        this.socketTimeout.toSeconds());
            }
            if (!isSet(pool, "tcpKeepAlive")) {
                pool.addDataSourceProperty("tcpKeepAlive", "true");
            }
        }
        return bean;
    }

    private static boolean isSet(HikariDataSource pool, String property) {
        return pool.getDataSourceProperties().containsKey(property)
                || pool.getJdbcUrl()
                        .toLowerCase(java.util.Locale.ROOT)
                        .contains(property.toLowerCase(java.util.Locale.ROOT) + "=");
    }
}
