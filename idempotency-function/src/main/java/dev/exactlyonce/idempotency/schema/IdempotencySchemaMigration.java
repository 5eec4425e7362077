package dev.exactlyonce.idempotency.schema;

import dev.exactlyonce.idempotency.jdbc.Dialect;
import java.util.Map;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.configuration.Configuration;
import org.flywaydb.core.api.output.MigrateResult;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.InitializingBean;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Migrates the library's tables (the processed ids, the scope registry, the outbox) with the library's own Flyway
 * migrations, after the service's migrations, with the service's Flyway connection and schemas. It is a database
 * initializer to Spring Boot ({@link IdempotencyDatabaseInitializerDetector}): it runs after the service's Flyway
 * migrations, and the beans that depend on database initialization wait for it.
 *
 * <p>The migrations keep a history table of their own, so their versions never clash with the service's and a new
 * library version brings its migrations without the service copying anything. Each table name has its own history:
 * {@value #HISTORY_TABLE} for the default table, {@code <table>_schema_history} for any other, so that a renamed
 * table, or a second service's table in the same schema, is created too (Flyway computes a migration's checksum
 * before it substitutes the table name, so one history shared by two names would count the second as migrated). The
 * first run baselines at version 0 when the schema already holds the service's tables, or at version 1 when it holds
 * the table itself (created from {@code schema-postgresql.sql}, or by the shared history of an earlier library
 * version). The partitioned table has migrations of its own: the mode is chosen before the table is created.
 */
final class IdempotencySchemaMigration implements InitializingBean {

    static final String HISTORY_TABLE = "idempotency_schema_history";

    private static final String DEFAULT_TABLE = "processed_event";

    private static final Logger logger = LoggerFactory.getLogger(IdempotencySchemaMigration.class);

    private final Flyway serviceFlyway;

    private final String tableName;

    private final boolean partitioned;

    IdempotencySchemaMigration(Flyway serviceFlyway, String tableName, boolean partitioned) {
        this.serviceFlyway = serviceFlyway;
        this.tableName = tableName;
        this.partitioned = partitioned;
    }

    @Override
    public void afterPropertiesSet() {
        Configuration service = this.serviceFlyway.getConfiguration();
        Dialect dialect = Dialect.of(service.getDataSource());
        MigrateResult result = Flyway.configure(getClass().getClassLoader())
                .dataSource(service.getDataSource())
                .schemas(service.getSchemas())
                .defaultSchema(service.getDefaultSchema())
                .table(historyTable(this.tableName))
                .locations(dialect.migrations(this.partitioned).toArray(String[]::new))
                .placeholders(Map.of("table", this.tableName))
                .baselineOnMigrate(true)
                .baselineVersion(tableExists(service, dialect) ? "1" : "0")
                .load()
                .migrate();
        logger.info(
                "Table {} is at version {} of the idempotency schema ({} migration(s) applied)",
                this.tableName,
                result.targetSchemaVersion != null ? result.targetSchemaVersion : result.initialSchemaVersion,
                result.migrationsExecuted);
    }

    /** The history of the table's migrations: one per table name. */
    static String historyTable(String tableName) {
        return tableName.equals(DEFAULT_TABLE) ? HISTORY_TABLE : tableName + "_schema_history";
    }

    /** Whether the table exists in the schema the service's Flyway migrates (its connection's, by default). */
    private boolean tableExists(Configuration service, Dialect dialect) {
        String schema = service.getDefaultSchema() != null
                ? service.getDefaultSchema()
                : service.getSchemas().length > 0 ? service.getSchemas()[0] : null;
        return dialect.tableExists(new JdbcTemplate(service.getDataSource()), schema, this.tableName);
    }
}
