package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.TableName;
import java.sql.Timestamp;
import java.util.Objects;
import javax.sql.DataSource;
import org.springframework.beans.factory.InitializingBean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Checks at start-up that the outbox's schema has what its statements need ({@link OutboxStatements#checkSchema}), and
 * that its instances agree on who publishes the outbox, registered in {@code outbox_publisher}. See docs/outbox.md
 * ("Instances agree on who publishes").
 */
final class OutboxPublisherRegistration implements InitializingBean {

    private static final String REGISTERED = """
            SELECT publisher, registered_at FROM outbox_publisher""";

    private static final String RELAY = "relay";

    private static final String EXTERNAL = "external";

    private final JdbcTemplate jdbc;

    private final boolean relayed;

    OutboxPublisherRegistration(DataSource dataSource, boolean relayed) {
        this.jdbc = new JdbcTemplate(dataSource);
        this.relayed = relayed;
    }

    @Override
    public void afterPropertiesSet() {
        if (!OutboxBacklogQuery.tableExists(this.jdbc)) {
            return;
        }
        if (!TableName.exists(this.jdbc, "outbox_publisher")) {
            throw new StartupRefusal(
                    "The schema has an outbox_event table but no outbox_publisher table, where the instances of the"
                            + " service record who publishes the outbox (the library's relay, or another process)",
                    "Create it as the library's schema-postgresql.sql (or schema-mariadb.sql) does (the library's"
                            + " Flyway migrations do when the service migrates with Flyway)");
        }
        if (!TableName.exists(this.jdbc, "outbox_key")) {
            throw new StartupRefusal(
                    "The schema has an outbox_event table but no outbox_key table, whose rows a transaction that"
                            + " writes events locks, so that each key's events are published in the order their"
                            + " transactions committed",
                    "Create it as the library's schema-postgresql.sql (or schema-mariadb.sql) does (the library's"
                            + " Flyway migrations do when the service migrates with Flyway)");
        }
        OutboxStatements sql = OutboxStatements.of(Dialect.of(Objects.requireNonNull(this.jdbc.getDataSource())));
        sql.checkSchema(this.jdbc, this.relayed);
        this.jdbc.update(sql.registerPublisher(), this.relayed ? RELAY : EXTERNAL);
        this.jdbc.query(REGISTERED, row -> {
            boolean registeredRelay = RELAY.equals(row.getString(1));
            if (registeredRelay != this.relayed) {
                Timestamp since = row.getTimestamp(2);
                throw new StartupRefusal(
                        ("The outbox of this schema is published by %s (registered at %s), and this instance is set"
                                        + " to %s: two publishers would send every event twice, and an instance"
                                        + " without the relay purges unpublished rows by age")
                                .formatted(
                                        registeredRelay ? "the library's relay" : "another process (Debezium)",
                                        since.toInstant(),
                                        this.relayed ? "relay it too" : "leave it to another process"),
                        ("Set idempotency.outbox.relay.enabled: %s as the schema's other instances do; to change who"
                                        + " publishes the outbox, stop every instance, DELETE FROM outbox_publisher,"
                                        + " and start them all with the new setting")
                                .formatted(registeredRelay));
            }
        });
    }
}
