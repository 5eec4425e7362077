package dev.exactlyonce.infra;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * The three services run from their jars on the test run's RabbitMQ and PostgreSQL: a database each, and an exchange
 * and queues whose names are unique to the run.
 */
final class ShopServices implements AutoCloseable {

    /** A service of the shop: its jar, its binding, its queue and its database. */
    record Service(String name, String binding, String queue, TestDatabase database, JdbcTemplate jdbc) {}

    private static final Map<String, String> BINDINGS = Map.of(
            "stock-service", "idempotencyGuardreserveStock-in-0",
            "shipping-service", "idempotencyGuardtrackOrderStatus-in-0",
            "billing-service", "idempotencyGuardinvoiceOrder-in-0");

    final TestRabbit rabbit = TestRabbit.broker();

    final String exchange = this.rabbit.uniqueName("events");

    final Map<String, Service> services = new LinkedHashMap<>();

    private final Map<String, ServiceProcess> processes = new LinkedHashMap<>();

    private final String paymentProviderUrl;

    ShopServices(String paymentProviderUrl) {
        this.paymentProviderUrl = paymentProviderUrl;
        for (String name : List.of("stock-service", "shipping-service", "billing-service")) {
            String prefix = name.substring(0, name.indexOf('-'));
            TestDatabase database = TestPostgres.newDatabase(prefix);
            this.services.put(
                    name,
                    new Service(
                            name,
                            BINDINGS.get(name),
                            this.rabbit.uniqueName(prefix + ".events"),
                            database,
                            new JdbcTemplate(new DriverManagerDataSource(
                                    database.jdbcUrl(), database.username(), database.password()))));
        }
    }

    /** Starts every service, at once, and waits until all have started. */
    ShopServices start() {
        List<CompletableFuture<Void>> starting = new ArrayList<>();
        for (Service service : this.services.values()) {
            starting.add(CompletableFuture.runAsync(() -> start(service)));
        }
        CompletableFuture.allOf(starting.toArray(CompletableFuture[]::new)).join();
        return this;
    }

    /** Starts (or starts again) one service. */
    void start(Service service) {
        ServiceProcess process = ServiceProcess.start(service.name(), properties(service));
        synchronized (this.processes) {
            this.processes.put(service.name(), process);
        }
    }

    Service service(String name) {
        return this.services.get(name);
    }

    ServiceProcess process(String name) {
        synchronized (this.processes) {
            return this.processes.get(name);
        }
    }

    /** How many rows the query counts in the service's database. */
    int count(String service, String sql, Object... args) {
        Integer count = this.services.get(service).jdbc().queryForObject(sql, Integer.class, args);
        return count != null ? count : 0;
    }

    @Override
    public void close() {
        synchronized (this.processes) {
            this.processes.values().forEach(ServiceProcess::close);
        }
    }

    private List<String> properties(Service service) {
        String binding = "spring.cloud.stream.bindings." + service.binding() + ".";
        return List.of(
                "spring.datasource.url=" + service.database().jdbcUrl(),
                "spring.datasource.username=" + service.database().username(),
                "spring.datasource.password=" + service.database().password(),
                "spring.rabbitmq.host=" + this.rabbit.host(),
                "spring.rabbitmq.port=" + this.rabbit.port(),
                binding + "destination=" + this.exchange,
                binding + "group=" + service.queue(),
                binding + "consumer.back-off-initial-interval=100",
                binding + "consumer.back-off-max-interval=500",
                "billing.payment-provider.url=" + this.paymentProviderUrl,
                "server.port=0");
    }
}
