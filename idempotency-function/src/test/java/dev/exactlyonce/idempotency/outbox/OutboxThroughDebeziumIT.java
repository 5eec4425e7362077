package dev.exactlyonce.idempotency.outbox;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.ClassPathResource;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.init.ResourceDatabasePopulator;
import org.springframework.transaction.support.TransactionTemplate;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The outbox table as Debezium reads it: the PostgreSQL connector ({@code pgoutput}) and the Outbox Event Router with
 * their default settings, in Debezium's embedded engine, as a service that turns the polling relay off and lets CDC
 * publish its rows would run them. Needs logical decoding ({@code wal_level = logical}; {@code .ci/run} turns it on
 * for the local server, the Testcontainers server has it).
 */
class OutboxThroughDebeziumIT {

    private static final String DESTINATION = "shop-events";

    @Test
    void theOutboxEventRouterRoutesEachCommittedRowWithOurEventIdKeyAndPayload() throws Exception {
        TestDatabase database = TestPostgres.newDatabase("debezium");
        DriverManagerDataSource dataSource =
                new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password());
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        assertThat(jdbc.queryForObject("SHOW wal_level", String.class))
                .as("logical decoding is off on this PostgreSQL: ALTER SYSTEM SET wal_level = logical, then restart"
                        + " it (.ci/run does so for the local server)")
                .isEqualTo("logical");
        new ResourceDatabasePopulator(new ClassPathResource("dev/exactlyonce/idempotency/schema-postgresql.sql"))
                .execute(dataSource);
        Outbox outbox = new Outbox(dataSource, new EnvelopeCodec(), DESTINATION, () -> {}, IdempotencyMetrics.NONE);
        DataSourceTransactionManager manager = new DataSourceTransactionManager(dataSource);
        manager.addListener(Outbox.transactionListener());
        TransactionTemplate transactions = new TransactionTemplate(manager);
        String slot = "outbox_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
        LinkedBlockingQueue<SourceRecord> records = new LinkedBlockingQueue<>();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        try (DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(
                        ChangeEventFormat.of(Connect.class))
                .using(connector(database, slot))
                .notifying(event -> records.add(event.record()))
                .build()) {
            executor.execute(engine);
            awaitStreaming(jdbc, slot);

            List<UUID> committed = transactions.execute(status -> List.of(
                    outbox.emit("stock.stock.reserved.v1", "order-1", Map.of("orderId", "order-1", "reservations", 2)),
                    outbox.emit(
                            "stock.stock.reserved.v1", "order-2", Map.of("orderId", "order-2", "reservations", 1))));
            transactions.executeWithoutResult(status -> {
                outbox.emit("stock.stock.reserved.v1", "rolled-back", Map.of("orderId", "rolled-back"));
                status.setRollbackOnly();
            });

            List<SourceRecord> routed = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                SourceRecord record = records.poll(60, TimeUnit.SECONDS);
                assertThat(record).as("a record from Debezium within 60 s").isNotNull();
                routed.add(record);
            }
            assertThat(records.poll(2, TimeUnit.SECONDS))
                    .as("nothing of the rolled-back row")
                    .isNull();

            JsonMapper json = JsonMapper.builder().build();
            assertThat(routed).extracting(SourceRecord::topic).containsOnly("outbox.event." + DESTINATION);
            assertThat(routed).extracting(SourceRecord::key).containsExactly("order-1", "order-2");
            assertThat(routed)
                    .extracting(record -> UUID.fromString(header(record, "id")))
                    .as("the event id, in the header the router puts it in")
                    .containsExactlyElementsOf(committed);
            JsonNode payload = json.readTree(routed.get(0).value().toString());
            assertThat(payload.path("orderId").asString()).isEqualTo("order-1");
            assertThat(payload.path("reservations").asInt()).isEqualTo(2);
        } finally {
            executor.shutdown();
            executor.awaitTermination(30, TimeUnit.SECONDS);
            jdbc.queryForList(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ?"
                            + " AND NOT active",
                    slot);
        }
    }

    private static Properties connector(TestDatabase database, String slot) {
        URI url = URI.create(database.jdbcUrl().substring("jdbc:".length()));
        Properties properties = new Properties();
        properties.setProperty("name", "outbox");
        properties.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        properties.setProperty("offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
        properties.setProperty("offset.flush.interval.ms", "60000");
        properties.setProperty("database.hostname", url.getHost());
        properties.setProperty("database.port", String.valueOf(url.getPort()));
        properties.setProperty("database.user", database.username());
        properties.setProperty("database.password", database.password());
        properties.setProperty("database.dbname", database.name());
        properties.setProperty("topic.prefix", "test");
        properties.setProperty("plugin.name", "pgoutput");
        properties.setProperty("slot.name", slot);
        properties.setProperty("slot.drop.on.stop", "true");
        properties.setProperty("publication.name", slot);
        properties.setProperty("publication.autocreate.mode", "filtered");
        properties.setProperty("table.include.list", "public.outbox_event");
        properties.setProperty("snapshot.mode", "no_data");
        // The router with its defaults: id, aggregatetype (the topic), aggregateid (the key), type, payload.
        properties.setProperty("transforms", "outbox");
        properties.setProperty("transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter");
        return properties;
    }

    /** Waits until the connector streams from its replication slot: rows committed from then on reach it. */
    private static void awaitStreaming(JdbcTemplate jdbc, String slot) {
        await().atMost(Duration.ofSeconds(60))
                .alias("Debezium streams from slot " + slot)
                .until(() -> Boolean.TRUE.equals(jdbc.queryForObject(
                        "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = ? AND active)",
                        Boolean.class,
                        slot)));
    }

    private static String header(SourceRecord record, String name) {
        Header header = record.headers().lastWithName(name);
        assertThat(header).as("header " + name).isNotNull();
        Object value = header.value();
        return value instanceof byte[] bytes ? new String(bytes, UTF_8) : String.valueOf(value);
    }
}
