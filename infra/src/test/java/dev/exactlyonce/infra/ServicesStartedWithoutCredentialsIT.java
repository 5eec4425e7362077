package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.ServiceProcess;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A service started from its jar without the settings a deployment must give it fails at start-up, saying which to
 * set, rather than logging in as a demo user (or as RabbitMQ's {@code guest}), or sending charges over plain http.
 */
class ServicesStartedWithoutCredentialsIT {

    private static final TestRabbit rabbit = TestRabbit.broker();

    /** A database of its own for each start: the services' migrations differ. */
    private final TestDatabase database = TestPostgres.newDatabase("nocredentials");

    @Test
    void withoutTheDatabasesCredentialsTheServiceRefusesToStartNamingThem() {
        assertThatThrownBy(() -> startAndStop("stock-service", List.of()))
                .hasMessageContaining("stock-service exited")
                .hasMessageContaining(
                        "could not be resolved: [spring.datasource.username, spring.datasource.password,");
    }

    @Test
    void withoutTheBrokersCredentialsTheServiceRefusesToStartNamingThem() {
        assertThatThrownBy(() -> startAndStop("stock-service", databaseCredentials()))
                .hasMessageContaining("stock-service exited")
                .hasMessageContaining("could not be resolved: [spring.rabbitmq.username, spring.rabbitmq.password,"
                        + " shop.relay.username, shop.relay.password]");
    }

    @Test
    void billingRefusesAPaymentProviderOnPlainHttp() {
        List<String> properties = new ArrayList<>(databaseCredentials());
        properties.addAll(List.of(
                "spring.rabbitmq.username=" + rabbit.username(),
                "spring.rabbitmq.password=" + rabbit.password(),
                "billing.payment-provider.url=http://payments.example.com"));

        assertThatThrownBy(() -> startAndStop("billing-service", properties))
                .hasMessageContaining("billing-service exited")
                .hasMessageContaining("billing.payment-provider.plain-http-allowed");
    }

    private List<String> databaseCredentials() {
        return List.of(
                "spring.datasource.username=" + this.database.username(),
                "spring.datasource.password=" + this.database.password());
    }

    /** Starts the service and, should it start, stops it at once. */
    private void startAndStop(String service, List<String> settings) {
        String binding = "spring.cloud.stream.bindings."
                + (service.equals("billing-service")
                        ? "idempotencyGuardinvoiceOrder-in-0"
                        : "idempotencyGuardreserveStock-in-0")
                + ".";
        String exchange = rabbit.topicExchange("nocredentials");
        List<String> properties = new ArrayList<>(List.of(
                "spring.datasource.url=" + this.database.jdbcUrl(),
                "spring.rabbitmq.host=" + rabbit.host(),
                "spring.rabbitmq.port=" + rabbit.port(),
                binding + "destination=" + exchange,
                binding + "group=" + rabbit.deleteAtExit(exchange + "." + service),
                "server.port=0",
                "management.server.port=0"));
        properties.addAll(settings);
        rabbit.directExchange(exchange + "." + service + ".dlx");
        ServiceProcess started = ServiceProcess.start(
                ServiceProcess.jar(Path.of(System.getProperty("services.dir", "..")), service),
                service,
                properties,
                Path.of("target", "no-credentials-" + service + ".log"));
        started.close();
    }
}
