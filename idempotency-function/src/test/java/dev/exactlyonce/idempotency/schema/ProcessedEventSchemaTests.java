package dev.exactlyonce.idempotency.schema;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.jdbc.PostgresDialect;
import dev.exactlyonce.idempotency.jdbc.ProcessedEventStore;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.flywaydb.core.Flyway;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;

/** The library's DDL: its Flyway migration, and the plain script for users of other tools. */
class ProcessedEventSchemaTests {

    private static final String COLUMNS = """
            SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
            FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position""";

    private static final String INDEXES = """
            SELECT replace(indexdef, ?, 'T') FROM pg_indexes WHERE tablename = ? ORDER BY indexname""";

    @Test
    void theFlywayMigrationCreatesTheTableOfThePlainScript() {
        DataSource scripted = dataSource(TestPostgres.newDatabase("schema"));
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(scripted);
        DataSource migrated = dataSource(TestPostgres.newDatabase("schema"));
        migrate(migrated, "processed_event");

        assertThat(describe(migrated, "processed_event_scope"))
                .isEqualTo(describe(scripted, "processed_event_scope"))
                .contains("CREATE UNIQUE INDEX T_pkey ON public.T USING btree (scope)");
        assertThat(describe(migrated, "outbox_event")).isEqualTo(describe(scripted, "outbox_event"));
        assertThat(describe(migrated, "processed_event_dead_letter"))
                .isEqualTo(describe(scripted, "processed_event_dead_letter"));
        assertThat(describe(migrated, "processed_event"))
                .isEqualTo(describe(scripted, "processed_event"))
                .contains(
                        "event_id uuid NO ",
                        "scope text NO ''::text",
                        "processed_at timestamp with time zone NO now()",
                        "event_name text NO ''::text")
                .contains(
                        "CREATE UNIQUE INDEX T_pkey ON public.T USING btree (event_id, scope, event_name)",
                        "CREATE INDEX T_processed_at_idx ON public.T USING btree (processed_at)");
    }

    @Test
    void thePartitionedMigrationCreatesTheTableOfThePartitionedScript() {
        DataSource scripted = dataSource(TestPostgres.newDatabase("schema"));
        new ResourceDatabasePopulator(
                        new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql-partitioned.sql"))
                .execute(scripted);
        DataSource migrated = dataSource(TestPostgres.newDatabase("schema"));
        migrate(migrated, "processed_event", true);

        assertThat(describe(migrated, "processed_event_scope")).isEqualTo(describe(scripted, "processed_event_scope"));
        assertThat(describe(migrated, "outbox_event")).isEqualTo(describe(scripted, "outbox_event"));
        assertThat(describe(migrated, "processed_event_dead_letter"))
                .isEqualTo(describe(scripted, "processed_event_dead_letter"));
        assertThat(describe(migrated, "processed_event"))
                .isEqualTo(describe(scripted, "processed_event"))
                .contains("CREATE UNIQUE INDEX T_pkey ON ONLY public.T USING btree (event_id, scope, event_name)")
                .hasSize(5);
        assertThat(new JdbcTemplate(migrated)
                        .queryForObject("SELECT pg_get_partkeydef('processed_event'::regclass)", String.class))
                .isEqualTo("RANGE (event_id)");
    }

    @Test
    void theMigrationUsesTheConfiguredTableName() {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));

        migrate(dataSource, "inbox");

        assertThat(describe(dataSource, "inbox")).hasSize(6);
        assertThat(describe(dataSource, "processed_event")).isEmpty();
    }

    @Test
    void theLibraryKeepsItsOwnHistorySoItsVersionsNeverClashWithTheService() {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));
        Flyway service = Flyway.configure()
                .dataSource(dataSource)
                .locations("classpath:db/migration")
                .load();
        service.migrate();

        migrate(dataSource, "processed_event");
        migrate(dataSource, "processed_event");

        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        assertThat(jdbc.queryForList(
                        "SELECT version FROM flyway_schema_history WHERE success ORDER BY installed_rank",
                        String.class))
                .containsExactly("1", "2");
        assertThat(jdbc.queryForList(
                        "SELECT version FROM idempotency_schema_history WHERE success ORDER BY installed_rank",
                        String.class))
                .containsExactly("0", "1", "2", "3", "4", "5", "6", "7", "8", "9");
    }

    @Test
    void aSecondTableNameInTheSameSchemaGetsItsOwnTableAndItsClaimsWork() {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));
        migrate(dataSource, "processed_event");

        migrate(dataSource, "billing_processed_event");

        assertThat(describe(dataSource, "billing_processed_event")).hasSize(6);
        ProcessedEventStore store =
                PostgresDialect.INSTANCE.processedEvents(new JdbcTemplate(dataSource), "billing_processed_event");
        ProcessedEventStore.Key event = new ProcessedEventStore.Key(UuidV7.generate(), "test.thing.happened.v1");
        assertThat(store.claim(event, "")).as("first delivery").isTrue();
        assertThat(store.claim(event, "")).as("a copy").isFalse();
        assertThat(new JdbcTemplate(dataSource)
                        .queryForList(
                                "SELECT version FROM billing_processed_event_schema_history WHERE success"
                                        + " ORDER BY installed_rank",
                                String.class))
                .as("a history of its own, at version 0 since the schema held another table")
                .containsExactly("0", "1", "2", "3", "4", "5", "6", "7", "8", "9");
    }

    @Test
    void aTableCreatedFromThePlainScriptIsAdoptedByTheMigrations() {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(dataSource);

        migrate(dataSource, "processed_event");

        assertThat(new JdbcTemplate(dataSource)
                        .queryForList(
                                "SELECT version FROM idempotency_schema_history WHERE success ORDER BY installed_rank",
                                String.class))
                .as("baselined at the version the table already has")
                .containsExactly("1", "2", "3", "4", "5", "6", "7", "8", "9");
    }

    @Test
    void claimsRecordedBeforeTheEventNameWasPartOfTheKeyStillCountUnderAnyName() {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));
        Flyway.configure(IdempotencySchemaMigration.class.getClassLoader())
                .dataSource(dataSource)
                .table(IdempotencySchemaMigration.HISTORY_TABLE)
                .locations(PostgresDialect.INSTANCE.migrations(false).toArray(String[]::new))
                .placeholders(java.util.Map.of("table", "processed_event"))
                .baselineOnMigrate(true)
                .baselineVersion("0")
                .target("4")
                .load()
                .migrate();
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        UUID single = UuidV7.generate();
        UUID batched = UuidV7.generate();
        jdbc.update("INSERT INTO processed_event (event_id, scope) VALUES (?, ''), (?, '')", single, batched);

        migrate(dataSource, "processed_event");

        ProcessedEventStore store = PostgresDialect.INSTANCE.processedEvents(jdbc, "processed_event");
        assertThat(store.claim(new ProcessedEventStore.Key(single, "test.thing.happened.v1"), ""))
                .as("a copy of an event processed before the upgrade")
                .isFalse();
        ProcessedEventStore.Key fresh = new ProcessedEventStore.Key(UuidV7.generate(), "test.thing.happened.v1");
        assertThat(store.claimAll(List.of(new ProcessedEventStore.Key(batched, "test.thing.happened.v1"), fresh), ""))
                .as("in a batch too")
                .containsExactly(fresh);
        assertThat(store.claim(new ProcessedEventStore.Key(single, "test.thing.happened.v1"), "a-function"))
                .as("the row is a claim in its own scope only")
                .isTrue();
    }

    /**
     * A table created from the plain script under the configured name, its constraints' names left as the script
     * writes them, then migrated by the library: the key is found by what it is, not by its name.
     */
    @Test
    void aRenamedTableFromThePlainScriptGetsTheEventNameInItsKey() throws Exception {
        DataSource dataSource = dataSource(TestPostgres.newDatabase("schema"));
        String script = new String(
                        new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql")
                                .getInputStream()
                                .readAllBytes(),
                        java.nio.charset.StandardCharsets.UTF_8)
                .replace("CREATE TABLE processed_event (", "CREATE TABLE inbox (")
                .replace("ON processed_event (", "ON inbox (")
                .replace("CREATE TABLE processed_event_scope (", "CREATE TABLE inbox_scope (");
        new ResourceDatabasePopulator(new org.springframework.core.io.ByteArrayResource(
                        script.getBytes(java.nio.charset.StandardCharsets.UTF_8)))
                .execute(dataSource);
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        jdbc.execute("ALTER TABLE inbox DROP CONSTRAINT processed_event_pkey,"
                + " ADD CONSTRAINT processed_event_pkey PRIMARY KEY (event_id, scope)");
        jdbc.execute("ALTER TABLE inbox DROP COLUMN event_name");

        migrate(dataSource, "inbox");

        assertThat(describe(dataSource, "inbox"))
                .contains("CREATE UNIQUE INDEX T_pkey ON public.T USING btree (event_id, scope, event_name)");
    }

    private static void migrate(DataSource dataSource, String tableName) {
        migrate(dataSource, tableName, false);
    }

    private static void migrate(DataSource dataSource, String tableName, boolean partitioned) {
        Flyway service = Flyway.configure().dataSource(dataSource).load();
        new IdempotencySchemaMigration(service, tableName, partitioned).afterPropertiesSet();
    }

    private static List<String> describe(DataSource dataSource, String table) {
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        List<String> description = new ArrayList<>(jdbc.queryForList(COLUMNS, String.class, table));
        description.addAll(jdbc.queryForList(INDEXES, String.class, table, table));
        return description;
    }

    private static DataSource dataSource(TestDatabase database) {
        return new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());
    }
}
