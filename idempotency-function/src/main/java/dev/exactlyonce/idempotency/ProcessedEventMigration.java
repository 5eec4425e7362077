package dev.exactlyonce.idempotency;

import java.util.Map;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.configuration.Configuration;
import org.flywaydb.core.api.output.MigrateResult;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.InitializingBean;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.flyway.autoconfigure.FlywayMigrationInitializer;

/**
 * Migrates the library's table with the library's own Flyway migrations, after the service's migrations, with the
 * service's Flyway connection and schemas.
 *
 * <p>The migrations keep their own history table, {@value #HISTORY_TABLE}, so their versions never clash with the
 * service's and a new library version brings its migrations without the service copying anything. The first run
 * baselines at version 0 when the schema already holds the service's tables. The partitioned table has migrations of
 * its own: the mode is chosen before the table is created.
 */
final class ProcessedEventMigration implements InitializingBean {

    static final String HISTORY_TABLE = "idempotency_schema_history";

    static final String LOCATION = "classpath:db/idempotency/postgresql";

    static final String PARTITIONED_LOCATION = "classpath:db/idempotency/postgresql-partitioned";

    private static final Logger logger = LoggerFactory.getLogger(ProcessedEventMigration.class);

    private final Flyway serviceFlyway;

    private final ObjectProvider<FlywayMigrationInitializer> serviceMigration;

    private final String tableName;

    private final String location;

    ProcessedEventMigration(
            Flyway serviceFlyway,
            ObjectProvider<FlywayMigrationInitializer> serviceMigration,
            String tableName,
            boolean partitioned) {
        this.serviceFlyway = serviceFlyway;
        this.serviceMigration = serviceMigration;
        this.tableName = tableName;
        this.location = partitioned ? PARTITIONED_LOCATION : LOCATION;
    }

    @Override
    public void afterPropertiesSet() {
        // Resolving the initializer runs the service's own migrations first.
        this.serviceMigration.ifAvailable(initializer -> {});
        Configuration service = this.serviceFlyway.getConfiguration();
        MigrateResult result = Flyway.configure(getClass().getClassLoader())
                .dataSource(service.getDataSource())
                .schemas(service.getSchemas())
                .defaultSchema(service.getDefaultSchema())
                .table(HISTORY_TABLE)
                .locations(this.location)
                .placeholders(Map.of("table", this.tableName))
                .baselineOnMigrate(true)
                .baselineVersion("0")
                .load()
                .migrate();
        logger.info(
                "Table {} is at version {} of the idempotency schema ({} migration(s) applied)",
                this.tableName,
                result.targetSchemaVersion != null ? result.targetSchemaVersion : result.initialSchemaVersion,
                result.migrationsExecuted);
    }
}
