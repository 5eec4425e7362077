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
 * Migrates the library's tables with its own Flyway migrations, after the service's, with the service's Flyway
 * connection and schemas. Each table name has its own history: Flyway checksums a migration before it substitutes the
 * name, so a shared history would count the second name as migrated. See docs/design.md, "How it works".
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
