package dev.exactlyonce.infra;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.Report;
import dev.exactlyonce.infra.shop.ServiceProcess;
import dev.exactlyonce.infra.shop.ShopBroker;
import dev.exactlyonce.infra.shop.ShopDatabases;
import dev.exactlyonce.infra.shop.ShopScenario;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.condition.EnabledIf;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operator console, from its jar, on the shop run from theirs (as {@code infra/demo.sh --console} runs them), in
 * Debian's headless Chromium. The payment provider refuses every charge for a while, so billing dead-letters the
 * placed orders it cannot charge, while every ordinary source of duplicates fires and a poison message reaches every
 * service. Once the provider charges again, an operator replays billing's group of refused charges from the console:
 * each order is charged once. Then the operator discards what is left (the poison, the copies of charges already
 * applied), after the confirmation; looks an order's event up across the services; and releases a parked outbox row.
 * The shop's report then says exactly once, with nothing left in a dead-letter queue. Skipped where no ChromeDriver is
 * installed.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@EnabledIf("chromeDriverInstalled")
class ConsoleOnTheShopIT {

    private static final Logger logger = LoggerFactory.getLogger(ConsoleOnTheShopIT.class);

    private static final int ORDERS = 12;

    private final TestRabbit rabbit = TestRabbit.broker();

    private final String run =
            "_ui" + Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0x10000));

    private final Path logs = Path.of("target", "shop" + this.run);

    private ShopScenario shop;

    private ServiceProcess console;

    private String consoleUrl;

    private WebDriver browser;

    static boolean chromeDriverInstalled() {
        return Files.isExecutable(chromeDriver());
    }

    private static Path chromeDriver() {
        return Path.of(System.getenv().getOrDefault("CHROMEDRIVER", "/usr/bin/chromedriver"));
    }

    @BeforeAll
    void start() throws Exception {
        TestPostgres postgres = TestPostgres.server();
        this.shop = new ShopScenario(
                        new ShopScenario.Settings(
                                new ShopDatabases.Server(
                                        "postgresql",
                                        postgres.host(),
                                        postgres.port(),
                                        postgres.username(),
                                        postgres.password()),
                                ShopBroker.rabbitMq(
                                        List.of(this.rabbit.host() + ":" + this.rabbit.port()),
                                        this.rabbit.username(),
                                        this.rabbit.password(),
                                        null),
                                Path.of(System.getProperty("services.dir", "..")),
                                this.run,
                                this.logs),
                        logger::info)
                .start();
        this.shop.brokerNames().forEach(this.rabbit::deleteAtExit);
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        this.consoleUrl = "http://127.0.0.1:" + port;
        List<String> properties = new ArrayList<>(List.of(
                "server.port=" + port,
                "console.users[0].name=olga",
                "console.users[0].password={noop}operator-secret",
                "console.users[0].role=operator",
                "console.broker.management-url=http://%s:%s"
                        .formatted(
                                this.rabbit.host(), System.getenv().getOrDefault("RABBITMQ_MANAGEMENT_PORT", "15672")),
                "console.broker.addresses=%s:%d".formatted(this.rabbit.host(), this.rabbit.port()),
                "console.broker.username=" + this.rabbit.username(),
                "console.broker.password=" + this.rabbit.password(),
                "console.audit-log=" + this.logs.resolve("console-audit.log")));
        for (int i = 0; i < ShopScenario.SERVICES.size(); i++) {
            String service = ShopScenario.SERVICES.get(i).name();
            properties.add("console.services[%d].name=%s".formatted(i, service));
            properties.add("console.services[%d].instances[0]=%s".formatted(i, this.shop.managementUrl(service)));
            properties.add("console.services[%d].queues[0]=%s".formatted(i, this.shop.queue(service)));
        }
        this.console = ServiceProcess.start(
                ServiceProcess.jar(
                        Path.of(System.getProperty("services.dir", "..")).resolve("infra"), "console"),
                "console",
                properties,
                this.logs.resolve("console.log"));
        ChromeOptions options = new ChromeOptions()
                .setBinary(System.getenv().getOrDefault("CHROMIUM", "/usr/bin/chromium"))
                .addArguments(
                        "--headless",
                        "--window-size=1400,1000",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-dev-shm-usage",
                        "--no-first-run");
        this.browser = new ChromeDriver(
                new ChromeDriverService.Builder()
                        .usingDriverExecutable(chromeDriver().toFile())
                        .usingAnyFreePort()
                        .build(),
                options);
        // The overview asks every service: it may take a few seconds while one is restarting.
        this.browser.manage().timeouts().implicitlyWait(Duration.ofSeconds(10));
    }

    @AfterAll
    void stop() throws Exception {
        if (this.browser != null) {
            this.browser.quit();
        }
        if (this.console != null) {
            this.console.close();
        }
        if (this.shop != null) {
            this.shop.close();
            this.shop.databases().drop();
            this.shop.dropBrokerUsers();
        }
    }

    @Test
    void refusedChargesReplayedFromTheConsoleAreChargedOnceAndTheShopEndsExact() throws Exception {
        String billingDeadLetters = "billing.events" + this.run + ".dlq";
        this.shop.refuseCharges(true);
        this.rabbit.publish(
                "events" + this.run, "order.order.placed.v1", "<script>alert('poison')</script>".getBytes(UTF_8), null);

        this.shop.run(ORDERS, () -> {
            // Every placed order has been refused once at least (a copy may be refused again meanwhile).
            await().atMost(Duration.ofMinutes(2))
                    .until(() -> this.rabbit.messageCount(billingDeadLetters) >= ORDERS + 1);
            this.shop.refuseCharges(false);
            signIn();
            WebElement refused = group(billingDeadLetters, "ChargeRefusedException");
            screenshot("shop-dead-letters");

            refused.findElement(By.className("replay")).click();

            assertThat(this.browser.findElement(By.className("message")).getText())
                    .startsWith("Replayed ")
                    .contains(" 0 refused ");
            // Each refused order once at least; a second copy of one is skipped if the first was applied meanwhile.
            List<WebElement> handled = this.browser.findElements(By.cssSelector("#handled tbody tr"));
            assertThat(handled)
                    .extracting(row -> row.findElement(By.className("outcome")).getText())
                    .isSubsetOf("REPLAYED", "SKIPPED");
            assertThat(handled.stream()
                            .filter(row -> row.findElement(By.className("outcome"))
                                    .getText()
                                    .equals("REPLAYED"))
                            .map(row -> row.getAttribute("data-event"))
                            .distinct())
                    .as("every order's event replayed")
                    .hasSize(ORDERS);
            screenshot("shop-replayed");
        });

        // What is left: the poison in each service's dead-letter queue, and in billing's the copies of charges a replay
        // applied before them; discarded, each queue's whole, after the confirmation.
        for (String service : List.of("stock", "shipping", "billing")) {
            String queue = service + ".events" + this.run + ".dlq";
            while (this.rabbit.messageCount(queue) > 0) {
                WebElement group = group(queue, "");
                group.findElement(By.className("discard")).click();
                assertThat(this.browser.findElement(By.id("to-discard")).getText())
                        .isNotEqualTo("0");
                this.browser.findElement(By.id("confirm-discard")).click();
                assertThat(this.browser.findElement(By.className("message")).getText())
                        .startsWith("Discarded ");
            }
        }

        Report report = this.shop.report();
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        report.print(new PrintStream(printed, true, UTF_8));
        logger.info("The shop's report:\n{}", printed.toString(UTF_8));
        assertThat(report.services())
                .allSatisfy(service ->
                        assertThat(service.differences()).as(service.service()).isEmpty());
        assertThat(report.exactlyOnce()).isTrue();

        UUID placed = anyPlacedEvent();
        this.browser.get(this.consoleUrl + "/events");
        this.browser.findElement(By.name("id")).sendKeys(placed.toString());
        this.browser.findElement(By.id("look-up")).click();
        assertThat(this.browser.findElements(By.cssSelector("#lookups .claims")))
                .extracting(WebElement::getText)
                .filteredOn(claims -> claims.startsWith("applied at "))
                .as("applied by the three services, each once")
                .hasSize(3);
        screenshot("shop-event-lookup");

        UUID parked = parkARowInStocksOutbox();
        this.browser.get(this.consoleUrl + "/parked");
        this.browser
                .findElement(By.cssSelector("#parked tr[data-id='" + parked + "']"))
                .findElement(By.className("skip"))
                .click();
        assertThat(this.browser.findElement(By.className("message")).getText())
                .isEqualTo("Skipped: outbox row %s of stock-service".formatted(parked));
        this.browser.get(this.consoleUrl + "/audit");
        assertThat(this.browser.findElements(By.cssSelector("#audit tbody tr")))
                .extracting(WebElement::getText)
                .anySatisfy(entry -> assertThat(entry).contains("olga", "replay"))
                .anySatisfy(entry -> assertThat(entry).contains("olga", "discard"))
                .anySatisfy(entry -> assertThat(entry).contains("olga", "skip", parked.toString()));
        screenshot("shop-audit");
    }

    private void signIn() {
        this.browser.get(this.consoleUrl + "/");
        this.browser.findElement(By.name("username")).sendKeys("olga");
        this.browser.findElement(By.name("password")).sendKeys("operator-secret");
        this.browser.findElement(By.cssSelector("button[type='submit']")).click();
        assertThat(this.browser.findElements(By.tagName("h1")))
                .as("the overview, signed in: %s", this.browser.getPageSource())
                .extracting(WebElement::getText)
                .containsExactly("Services");
    }

    /** The first group of the queue whose cause contains the text, once the page lists it. */
    private WebElement group(String queue, String cause) {
        By section = By.cssSelector("section[data-queue='" + queue + "']");
        By group = By.xpath(".//tr[@data-cause and contains(@data-cause, '" + cause + "')]");
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            this.browser.get(this.consoleUrl + "/dead-letters");
            return !this.browser.findElements(section).isEmpty()
                    && !this.browser.findElement(section).findElements(group).isEmpty();
        });
        return this.browser.findElement(section).findElement(group);
    }

    private UUID anyPlacedEvent() throws Exception {
        try (Connection billing = this.shop.databases().connectAs("billing", "billing");
                ResultSet row =
                        billing.createStatement().executeQuery("SELECT event_id FROM processed_event LIMIT 1")) {
            assertThat(row.next()).isTrue();
            return row.getObject(1, UUID.class);
        }
    }

    /** An outbox row of stock's that its relay parked, as after the broker refused it for good. */
    private UUID parkARowInStocksOutbox() throws Exception {
        UUID id = UuidV7.generate();
        try (Connection stock = this.shop.databases().connectAs("stock", "stock");
                PreparedStatement insert = stock.prepareStatement(
                        "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, attempts, last_error,"
                                + " parked_at) VALUES (?, 'events" + this.run + "', 'parked-key',"
                                + " 'stock.stock.reserved.v1', '{}'::jsonb, 5, 'refused', now())")) {
            insert.setObject(1, id);
            insert.executeUpdate();
        }
        return id;
    }

    private void screenshot(String name) {
        Path file = Path.of("target", "console-screenshots", name + ".png");
        try {
            Files.createDirectories(file.getParent());
            Files.write(file, ((TakesScreenshot) this.browser).getScreenshotAs(OutputType.BYTES));
        } catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
        logger.info("Screenshot of {}: {}", this.browser.getCurrentUrl(), file.toAbsolutePath());
    }
}
