package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.Report;
import dev.exactlyonce.infra.shop.ShopBroker;
import dev.exactlyonce.infra.shop.ShopDatabases;
import dev.exactlyonce.infra.shop.ShopScenario;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.condition.EnabledIf;

/**
 * The three services run together from their jars on real RabbitMQ and PostgreSQL while every ordinary source of
 * duplicates fires (the order service's relay publishes again what its failed commit did not mark, every broker
 * connection drops once, a period is replayed), stock is killed with {@code kill -9} while its outbox holds committed
 * events not yet published, and billing is killed and started again: every event is applied exactly once, across both
 * hops (order service to stock, stock to shipping through stock's outbox), nothing is lost, the queues drain, nothing
 * is dead-lettered. {@code ThreeSourcesOfDuplicatesOnMariaDbIT} runs the same on MariaDB, and
 * {@code ThreeSourcesOfDuplicatesOnKafkaIT} on Kafka; a build runs one of the three ({@link ShopOfTheRun}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@EnabledIf(value = "dev.exactlyonce.infra.ShopOfTheRun#postgresql", disabledReason = ShopOfTheRun.SKIPPED)
class ThreeSourcesOfDuplicatesIT {

    private static final int ORDERS = 200;

    private ShopScenario shop;

    /** The database server the shop runs on. */
    ShopDatabases.Server database() {
        TestPostgres postgres = TestPostgres.server();
        return new ShopDatabases.Server(
                "postgresql", postgres.host(), postgres.port(), postgres.username(), postgres.password());
    }

    /** The broker the shop runs on. */
    ShopBroker broker() {
        TestRabbit rabbit = TestRabbit.broker();
        return ShopBroker.rabbitMq(List.of(rabbit.host() + ":" + rabbit.port()), "guest", "guest", null);
    }

    /** Deletes the run's names on the broker once the tests are over. */
    void deleteAtExit(List<String> names) {
        names.forEach(TestRabbit.broker()::deleteAtExit);
    }

    /** What the server says when a role opens a database it may not. */
    String accessDenied() {
        return "permission denied for database";
    }

    @BeforeAll
    void start() throws Exception {
        String run = "_it" + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000));
        this.shop = new ShopScenario(
                        new ShopScenario.Settings(
                                database(),
                                broker(),
                                Path.of(System.getProperty("services.dir", "..")),
                                run,
                                Path.of("target", "shop" + run)),
                        System.out::println)
                .start();
        deleteAtExit(this.shop.brokerNames());
    }

    @AfterAll
    void stop() throws Exception {
        this.shop.close();
        this.shop.databases().drop();
        this.shop.dropBrokerUsers();
    }

    @Test
    void everyEventIsAppliedExactlyOnceWhateverTheCopiesAndTheCrash() throws Exception {
        this.shop.run(ORDERS, () -> this.shop.killAndRestart("billing-service"));

        Report report = this.shop.report();
        report.print(System.out);
        assertThat(report.services())
                .allSatisfy(service ->
                        assertThat(service.differences()).as(service.service()).isEmpty());
        assertThat(report.exactlyOnce()).isTrue();
        assertThat(report.services())
                .extracting(Report.ServiceReport::processed)
                .containsExactly(ORDERS, 6 * ORDERS, ORDERS);
        assertThat(report.hops()).singleElement().satisfies(hop -> {
            assertThat(hop.emitted()).as("stock.stock.reserved.v1 written").isEqualTo(ORDERS);
            assertThat(hop.applied()).as("and applied by shipping, once each").isEqualTo(ORDERS);
        });
        assertThat(report.published())
                .as("copies from the relay and the replay")
                .isGreaterThan(report.written());
    }

    @Test
    void aServiceRoleCannotReachAnotherServicesDatabase() throws SQLException {
        try (Connection own = this.shop.databases().connectAs("stock", "stock")) {
            assertThat(own.isValid(2)).isTrue();
        }
        assertThatExceptionOfType(SQLException.class)
                .isThrownBy(() ->
                        this.shop.databases().connectAs("stock", "shipping").close())
                .withMessageContaining(accessDenied());
        assertThatExceptionOfType(SQLException.class)
                .isThrownBy(() ->
                        this.shop.databases().connectAs("billing", "stock").close())
                .withMessageContaining(accessDenied());
    }
}
