package dev.exactlyonce.console;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import dev.exactlyonce.guarded.GuardedService;
import dev.exactlyonce.guarded.GuardedService.ParcelWeighed;
import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.test.TestDatabase;
import dev.exactlyonce.idempotency.test.TestPostgres;
import dev.exactlyonce.idempotency.test.TestRabbit;
import java.net.CookieManager;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.openqa.selenium.By;
import org.openqa.selenium.NoAlertPresentException;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebDriver;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The console in Debian's headless Chromium, driven through its ChromeDriver, against a real guarded service (the
 * library on RabbitMQ and PostgreSQL, its Actuator endpoints over HTTP): an operator signs in, sees the service up with
 * its poison message waiting in the dead letters, looks an applied event and the poison up, releases a parked outbox row
 * whose key and last error are HTML and script (shown as text, never run), and finds the release in the audit log. A
 * viewer sees no action, and one forged with the viewer's session and CSRF token is refused. Skipped where no
 * ChromeDriver is installed ({@code /usr/bin/chromedriver}, or {@code CHROMEDRIVER}; {@code .ci/run} installs
 * Debian's).
 */
@SpringBootTest(
        classes = ConsoleApplication.class,
        webEnvironment = WebEnvironment.RANDOM_PORT,
        properties = {
            "server.address=127.0.0.1",
            "console.users[0].name=olga",
            "console.users[0].password={noop}operator-secret",
            "console.users[0].role=operator",
            "console.users[1].name=victor",
            "console.users[1].password={noop}viewer-secret",
            "console.users[1].role=viewer",
            // The guarded service's classes are on this test's class path; the console itself has no database.
            "spring.autoconfigure.exclude=org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration,"
                    + "org.springframework.boot.flyway.autoconfigure.FlywayAutoConfiguration",
            "spring.cloud.function.definition=",
            "spring.cloud.stream.function.autodetect=false"
        })
@EnabledIf("chromeDriverInstalled")
class ConsoleInABrowserIT {

    private static final Logger logger = LoggerFactory.getLogger(ConsoleInABrowserIT.class);

    private static final TestRabbit rabbit = TestRabbit.broker();

    private static final String DESTINATION = rabbit.uniqueName("console");

    private static final String QUEUE = rabbit.deleteAtExit(DESTINATION + ".parcels");

    private static final TestDatabase database = TestPostgres.newDatabase("console");

    private static final JdbcTemplate jdbc =
            new JdbcTemplate(new DriverManagerDataSource(database.jdbcUrl(), database.username(), database.password()));

    private static ConfigurableApplicationContext service;

    private static URI serviceManagement;

    static boolean chromeDriverInstalled() {
        return Files.isExecutable(chromeDriver());
    }

    private static Path chromeDriver() {
        return Path.of(System.getenv().getOrDefault("CHROMEDRIVER", "/usr/bin/chromedriver"));
    }

    /** Starts the guarded service, and points the console at its management port. */
    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) throws Exception {
        String binding = "--spring.cloud.stream.bindings.idempotencyGuardrecordParcel-in-0.";
        service = new SpringApplicationBuilder(GuardedService.class)
                .run(
                        "--spring.application.name=parcel-service",
                        "--spring.cloud.function.definition=idempotencyGuard|recordParcel",
                        "--spring.cloud.stream.default-binder=rabbit",
                        binding + "destination=" + DESTINATION,
                        binding + "group=parcels",
                        binding + "consumer.back-off-initial-interval=50",
                        "--spring.datasource.url=" + database.jdbcUrl(),
                        "--spring.datasource.username=" + database.username(),
                        "--spring.datasource.password=" + database.password(),
                        "--spring.rabbitmq.host=" + rabbit.host(),
                        "--spring.rabbitmq.port=" + rabbit.port(),
                        "--spring.rabbitmq.username=" + rabbit.username(),
                        "--spring.rabbitmq.password=" + rabbit.password(),
                        "--server.port=0",
                        "--server.address=127.0.0.1",
                        "--management.server.port=0",
                        "--management.server.address=127.0.0.1",
                        "--management.endpoints.web.exposure.include=health,idempotency,outbox",
                        "--management.endpoint.health.show-details=always",
                        "--management.endpoint.outbox.access=unrestricted",
                        // A first purge at once, for the overview's last purge (the next is an hour later).
                        "--idempotency.purge.initial-delay=100ms");
        serviceManagement =
                URI.create("http://127.0.0.1:" + service.getEnvironment().getProperty("local.management.port"));
        // The queue's replay exchange, bound to the queue and its dead-letter queue alone, as the shop's definitions
        // declare one for each of its queues.
        String replay = rabbit.directExchange(QUEUE + ".replay");
        try (com.rabbitmq.client.Connection connection = rabbit.newConnection();
                com.rabbitmq.client.Channel channel = connection.createChannel()) {
            channel.queueBind(QUEUE, replay, QUEUE);
            channel.queueBind(QUEUE + ".dlq", replay, QUEUE + ".dlq");
        }
        registry.add("console.services[0].name", () -> "parcel-service");
        registry.add(
                "console.broker.management-url",
                () -> "http://%s:%s"
                        .formatted(rabbit.host(), System.getenv().getOrDefault("RABBITMQ_MANAGEMENT_PORT", "15672")));
        registry.add("console.broker.addresses", () -> rabbit.host() + ":" + rabbit.port());
        registry.add("console.broker.username", rabbit::username);
        registry.add("console.broker.password", rabbit::password);
        registry.add("console.services[0].instances[0]", () -> serviceManagement.toString());
        registry.add("console.services[0].queues[0]", () -> QUEUE);
        Path auditLog = Files.createTempFile("console-audit", ".log");
        registry.add("console.audit-log", auditLog::toString);
    }

    @AfterAll
    static void stopTheService() {
        if (service != null) {
            service.close();
        }
    }

    @LocalServerPort
    int port;

    private WebDriver browser;

    @BeforeEach
    void openTheBrowser() {
        ChromeOptions options = new ChromeOptions()
                .setBinary(System.getenv().getOrDefault("CHROMIUM", "/usr/bin/chromium"))
                .addArguments(
                        "--headless",
                        "--window-size=1400,1000",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-dev-shm-usage",
                        "--disable-background-networking",
                        "--disable-component-update",
                        "--disable-sync",
                        "--no-first-run");
        ChromeDriverService driver = new ChromeDriverService.Builder()
                .usingDriverExecutable(chromeDriver().toFile())
                .usingAnyFreePort()
                .build();
        this.browser = new ChromeDriver(driver, options);
        this.browser.manage().timeouts().implicitlyWait(Duration.ofSeconds(2));
    }

    @AfterEach
    void closeTheBrowser() {
        if (this.browser != null) {
            this.browser.quit();
        }
    }

    @Test
    void anOperatorSeesThePoisonLooksEventsUpAndReleasesAParkedRowWhoseTextIsShownAndNeverRun() throws Exception {
        EventEnvelope<ParcelWeighed> applied = parcel(750);
        EventEnvelope<ParcelWeighed> poison = parcel(0);
        rabbit.publish(DESTINATION, applied);
        rabbit.publish(DESTINATION, poison);
        rabbit.publish(DESTINATION, ParcelWeighed.NAME, "<script>alert('payload')</script>".getBytes(UTF_8), null);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(2));
        UUID parked = parkARow("<img src=x onerror=alert('key')>", "<script>alert('error')</script><b>refused</b>");

        signIn("olga", "operator-secret");

        WebElement instance = this.browser.findElement(By.cssSelector("#instances tr[data-service='parcel-service']"));
        assertThat(instance.findElement(By.className("status")).getText()).isEqualTo("UP");
        assertThat(instance.getText()).contains("idempotencyGuardrecordParcel-in-0");
        assertThat(instance.findElement(By.className("dead-letters-waiting")).getText())
                .isEqualTo("1");
        String lastPurge = instance.findElement(By.className("last-purge")).getText();
        assertThat(lastPurge).startsWith("last purge: ").endsWith(" row(s) deleted");
        assertThat(Instant.parse(lastPurge.substring("last purge: ".length(), lastPurge.indexOf(','))))
                .isBetween(Instant.now().minusSeconds(300), Instant.now());
        screenshot("overview");

        // The management API lists a new queue within the broker's statistics interval (5 s by default).
        By dlq = By.cssSelector("section[data-queue='" + QUEUE + ".dlq']");
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            this.browser.get(url("/dead-letters"));
            return !this.browser.findElements(dlq).isEmpty();
        });
        WebElement deadLetters = this.browser.findElement(dlq);
        assertThat(deadLetters.findElement(By.className("messages")).getText()).isEqualTo("2");
        // The poison's cause: its exception's type, and the first frame of the application's code (a lambda).
        assertThat(deadLetters.findElements(By.className("group")))
                .extracting(
                        group -> group.findElement(By.className("cause"))
                                .getText()
                                .replaceFirst("\\$\\d+$", ""),
                        group -> group.findElement(By.className("count")).getText())
                .containsExactlyInAnyOrder(
                        tuple(
                                "java.lang.IllegalArgumentException at " + GuardedService.class.getName()
                                        + ".lambda$recordParcel",
                                "1"),
                        tuple("NOT_JSON", "1"));
        assertThat(deadLetters.findElements(By.className("payload")))
                .extracting(WebElement::getText)
                .contains("<script>alert('payload')</script>");
        // Dated by the service's record of the poison; the body with no event id, which it could not record, is not.
        assertThat(deadLetters.findElements(By.className("group")))
                .extracting(
                        group -> group.findElement(By.className("cause")).getText(),
                        group -> group.findElement(By.className("first-seen")).getText())
                .anySatisfy(group -> {
                    assertThat(group.toList().get(0)).asString().contains("IllegalArgumentException");
                    assertThat(Instant.parse(group.toList().get(1).toString()))
                            .isBetween(Instant.now().minusSeconds(120), Instant.now());
                })
                .contains(tuple("NOT_JSON", "—"));
        assertNoAlert();
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).as("read, and put back").isEqualTo(2);
        screenshot("dead-letters-by-cause");

        lookUp(applied.eventId().toString());
        assertThat(this.browser.findElement(By.cssSelector("#lookups .claims")).getText())
                .startsWith("applied at ")
                .contains(ParcelWeighed.NAME);
        lookUp(poison.eventId().toString());
        assertThat(this.browser.findElement(By.cssSelector("#lookups .claims")).getText())
                .isEqualTo("not applied here");
        assertThat(this.browser
                        .findElement(By.cssSelector("#lookups .dead-letters"))
                        .getText())
                .startsWith("dead-lettered by idempotencyGuardrecordParcel-in-0 at ")
                .endsWith("waiting to be replayed");
        screenshot("event-lookup");
        lookUp("not-an-id");
        assertThat(this.browser.findElement(By.className("error")).getText()).startsWith("Not an event id");

        this.browser.get(url("/parked"));
        WebElement row = this.browser.findElement(By.cssSelector("#parked tr[data-id='" + parked + "']"));
        assertThat(row.findElement(By.className("key")).getText()).isEqualTo("<img src=x onerror=alert('key')>");
        assertThat(row.findElement(By.className("last-error")).getText())
                .isEqualTo("<script>alert('error')</script><b>refused</b>");
        assertThat(row.findElements(By.tagName("img")))
                .as("the key is text, not an element")
                .isEmpty();
        assertThat(row.findElements(By.tagName("script"))).isEmpty();
        assertNoAlert();
        screenshot("parked");

        row.findElement(By.className("release")).click();

        assertThat(this.browser.findElement(By.className("message")).getText())
                .isEqualTo("Released: outbox row %s of parcel-service".formatted(parked));
        assertThat(jdbc.queryForObject(
                        "SELECT parked_at IS NULL FROM outbox_event WHERE id = ?", Boolean.class, parked))
                .as("released in the service's outbox")
                .isTrue();
        assertThat(this.browser.findElements(By.cssSelector("#parked tr[data-id='" + parked + "']")))
                .isEmpty();
        this.browser.get(url("/audit"));
        assertThat(this.browser.findElement(By.cssSelector("#audit tbody tr")).getText())
                .contains("olga", "release", parked.toString());
        assertNoAlert();
    }

    /**
     * A group of dead letters replayed from the console once their cause is gone: each one the service dead-lettered
     * is applied once; one it dead-lettered longer ago than its dead-letter retention is skipped, and one a neighbour
     * put into the dead-letter queue (its headers copied from a real dead letter) is refused, each with its reason, both
     * left in the queue; then those two discarded, after a confirmation. Every action in the audit log.
     */
    @Test
    void aGroupReplayedFromTheConsoleAppliesEachDeadLetterOnceAndLeavesTheRestWithTheirReasons() throws Exception {
        jdbc.update("INSERT INTO scale_fault DEFAULT VALUES");
        EventEnvelope<ParcelWeighed> first = parcel(410);
        EventEnvelope<ParcelWeighed> second = parcel(420);
        EventEnvelope<ParcelWeighed> old = parcel(430);
        int waiting = rabbit.messageCount(QUEUE + ".dlq");
        rabbit.publish(DESTINATION, first);
        rabbit.publish(DESTINATION, second);
        rabbit.publish(DESTINATION, old);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(
                        () -> assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(waiting + 3));
        jdbc.update("DELETE FROM scale_fault");
        jdbc.update(
                "UPDATE processed_event_dead_letter SET dead_lettered_at = now() - interval '30 days'"
                        + " WHERE event_id = ?",
                old.eventId());

        signIn("olga", "operator-secret");
        By dlq = By.cssSelector("section[data-queue='" + QUEUE + ".dlq']");
        By offline = By.xpath(".//tr[contains(@data-cause, 'IllegalStateException')]");
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            this.browser.get(url("/dead-letters"));
            return !this.browser.findElements(dlq).isEmpty()
                    && !this.browser.findElement(dlq).findElements(offline).isEmpty();
        });
        String cause = this.browser.findElement(dlq).findElement(offline).getAttribute("data-cause");
        assertThat(cause).startsWith("java.lang.IllegalStateException at " + GuardedService.class.getName() + ".");
        // A neighbour's message in the dead-letter queue, made to look like one of the group: the headers of a real
        // dead letter of that cause, around an event the service never saw.
        EventEnvelope<ParcelWeighed> forged = parcel(440);
        publishToDeadLetters(forged, cause);
        this.browser.get(url("/dead-letters"));
        WebElement group = this.browser.findElement(dlq).findElement(offline);
        assertThat(group.findElement(By.className("count")).getText()).isEqualTo("4");
        screenshot("dead-letters");

        group.findElement(By.className("replay")).click();

        assertThat(this.browser.findElement(By.className("message")).getText())
                .isEqualTo("Replayed 2 message(s) from %s.dlq; 1 refused and 1 skipped, left there (below, each one)"
                        .formatted(QUEUE));
        assertThat(this.browser.findElements(By.cssSelector("#handled tbody tr")))
                .extracting(
                        row -> row.getAttribute("data-event"),
                        row -> row.findElement(By.className("outcome")).getText())
                .containsExactly(
                        tuple(first.eventId().toString(), "REPLAYED"),
                        tuple(second.eventId().toString(), "REPLAYED"),
                        tuple(old.eventId().toString(), "SKIPPED"),
                        tuple(forged.eventId().toString(), "REFUSED"));
        assertThat(this.browser
                        .findElement(By.cssSelector("#handled tr[data-event='" + old.eventId() + "'] .why"))
                        .getText())
                .startsWith("too old for the replay horizon: parcel-service dead-lettered it at ");
        assertThat(this.browser
                        .findElement(By.cssSelector("#handled tr[data-event='" + forged.eventId() + "'] .why"))
                        .getText())
                .startsWith("no service recorded dead-lettering it");
        screenshot("dead-letters-replayed");
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(jdbc.queryForList(
                                "SELECT parcel_id FROM parcel WHERE grams IN (410, 420, 430, 440) ORDER BY grams",
                                UUID.class))
                        .containsExactly(
                                first.payload().parcelId(), second.payload().parcelId()));

        this.browser.get(url("/dead-letters"));
        group = this.browser.findElement(dlq).findElement(offline);
        assertThat(group.findElement(By.className("count")).getText()).isEqualTo("2");
        for (UUID left : new UUID[] {old.eventId(), forged.eventId()}) {
            group.findElement(By.cssSelector("input[value='" + left + "']")).click();
        }
        group.findElement(By.className("discard")).click();
        assertThat(this.browser.findElement(By.id("to-discard")).getText()).isEqualTo("2");
        assertThat(rabbit.messageCount(QUEUE + ".dlq"))
                .as("not before it is confirmed")
                .isEqualTo(waiting + 2);
        screenshot("confirm-discard");
        this.browser.findElement(By.id("confirm-discard")).click();

        assertThat(this.browser.findElement(By.className("message")).getText())
                .isEqualTo("Discarded 2 message(s) from %s.dlq".formatted(QUEUE));
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(waiting);
        this.browser.get(url("/audit"));
        assertThat(this.browser.findElements(By.cssSelector("#audit tbody tr")))
                .extracting(WebElement::getText)
                .anySatisfy(entry -> assertThat(entry).contains("olga", "discard", "2"))
                .anySatisfy(entry -> assertThat(entry).contains("olga", "replay", "cause " + cause));
        screenshot("audit");
        assertNoAlert();
    }

    /**
     * A dead-letter queue whose every read would count against a delivery limit (a quorum queue's, 20 by default on
     * RabbitMQ 4) is listed, not read: past the limit the broker drops the message.
     */
    @Test
    void aQuorumDeadLetterQueueWithADeliveryLimitIsListedNotRead() throws Exception {
        String limited = rabbit.deleteAtExit(rabbit.uniqueName("limited") + ".dlq");
        try (com.rabbitmq.client.Connection connection = rabbit.newConnection();
                com.rabbitmq.client.Channel channel = connection.createChannel()) {
            channel.queueDeclare(limited, true, false, false, Map.of("x-queue-type", "quorum", "x-delivery-limit", 2));
        }
        rabbit.publish("", limited, "{}".getBytes(UTF_8), null);

        signIn("victor", "viewer-secret");
        By queue = By.cssSelector("section[data-queue='" + limited + "']");
        for (int view = 0; view < 3; view++) {
            await().atMost(Duration.ofSeconds(30)).until(() -> {
                this.browser.get(url("/dead-letters"));
                return !this.browser.findElements(queue).isEmpty();
            });
        }

        assertThat(rabbit.messageCount(limited))
                .as("three views later, still there")
                .isEqualTo(1);
        assertThat(this.browser
                        .findElement(queue)
                        .findElement(By.className("warn"))
                        .getText())
                .startsWith("Not read: a quorum queue with a delivery limit of 2");
    }

    @Test
    void aViewerSeesNoActionAndAnActionForgedWithTheViewersSessionIsRefused() throws Exception {
        UUID parked = parkARow("viewer-key", "refused");

        signIn("victor", "viewer-secret");
        this.browser.get(url("/parked"));
        assertThat(this.browser
                        .findElement(By.cssSelector("#parked tr[data-id='" + parked + "']"))
                        .getText())
                .contains("viewer-key");
        assertThat(this.browser.findElements(By.className("release"))).isEmpty();

        // The same, without a browser: the viewer's session and its CSRF token, and a POST of the operator's form.
        HttpClient http = signedIn("victor", "viewer-secret");
        String page = http.send(
                        HttpRequest.newBuilder(URI.create(url("/parked"))).build(),
                        HttpResponse.BodyHandlers.ofString())
                .body();
        HttpResponse<String> forged = post(
                http,
                "/parked/release",
                Map.of(
                        "instance", serviceManagement.toString(),
                        "id", parked.toString(),
                        "_csrf", csrf(page)));

        assertThat(forged.statusCode()).isEqualTo(403);
        assertThat(jdbc.queryForObject(
                        "SELECT parked_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, parked))
                .as("still parked")
                .isTrue();
        int deadLetters = rabbit.messageCount(QUEUE + ".dlq");
        assertThat(post(
                                http,
                                "/dead-letters/discard",
                                Map.of(
                                        "queue",
                                        QUEUE + ".dlq",
                                        "confirmed",
                                        "true",
                                        "cause",
                                        "NOT_JSON",
                                        "_csrf",
                                        csrf(page)))
                        .statusCode())
                .isEqualTo(403);
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(deadLetters);
    }

    /** An operator releases the parked rows of one key, then skips every row left: each by the instance's endpoint. */
    @Test
    void anOperatorReleasesAKeysParkedRowsThenSkipsAllTheOthers() throws Exception {
        String key = "key-" + UUID.randomUUID();
        UUID first = parkARow(key, "refused");
        UUID second = parkARow(key, "refused");
        UUID other = parkARow("other-" + UUID.randomUUID(), "refused");

        signIn("olga", "operator-secret");
        this.browser.get(url("/parked"));
        this.browser
                .findElement(By.cssSelector("#parked tr[data-id='" + first + "']"))
                .findElement(By.className("release-key"))
                .click();

        assertThat(this.browser.findElement(By.className("message")).getText())
                .startsWith("Released 2 parked row(s) of parcel-service (key %s)".formatted(key));
        assertThat(parkedOf(first, second, other)).containsExactly(false, false, true);

        this.browser.findElement(By.className("skip-all")).click();

        // The page before it has a message too: the next page's, once it is there.
        await().atMost(Duration.ofSeconds(10))
                .ignoreExceptions()
                .until(() -> this.browser
                        .findElement(By.className("message"))
                        .getText()
                        .matches("Skipped \\d+ parked row\\(s\\) of parcel-service \\(all\\).*"));
        assertThat(
                        jdbc.queryForList(
                                "SELECT id, aggregateid FROM outbox_event WHERE parked_at IS NOT NULL AND published_at IS NULL"))
                .as("no row parked any more (a skipped row keeps its parked_at, and is marked published)")
                .isEmpty();
        assertThat(jdbc.queryForObject(
                        "SELECT skipped_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, other))
                .isTrue();
        this.browser.get(url("/audit"));
        assertThat(this.browser.findElement(By.cssSelector("#audit tbody tr")).getText())
                .contains("olga", "skip", "all rows");
    }

    private static List<Boolean> parkedOf(UUID... ids) {
        return Stream.of(ids)
                .map(id -> jdbc.queryForObject(
                        "SELECT parked_at IS NOT NULL AND published_at IS NULL FROM outbox_event WHERE id = ?",
                        Boolean.class,
                        id))
                .toList();
    }

    /** An operator's action posted without the page's CSRF token (from another site's form, say) is refused. */
    @Test
    void anOperatorsActionWithoutItsCsrfTokenIsRefused() throws Exception {
        UUID parked = parkARow("csrf-key", "refused");
        HttpClient http = signedIn("olga", "operator-secret");
        int deadLetters = rabbit.messageCount(QUEUE + ".dlq");

        HttpResponse<String> release = post(
                http, "/parked/release", Map.of("instance", serviceManagement.toString(), "id", parked.toString()));
        HttpResponse<String> discard = post(
                http,
                "/dead-letters/discard",
                Map.of("queue", QUEUE + ".dlq", "confirmed", "true", "cause", "NOT_JSON"));

        assertThat(release.statusCode()).isEqualTo(403);
        assertThat(discard.statusCode()).isEqualTo(403);
        assertThat(jdbc.queryForObject(
                        "SELECT parked_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, parked))
                .as("still parked")
                .isTrue();
        assertThat(rabbit.messageCount(QUEUE + ".dlq")).isEqualTo(deadLetters);
        // With the token, the same session acts: the refusal was the token's.
        String page = http.send(
                        HttpRequest.newBuilder(URI.create(url("/parked"))).build(),
                        HttpResponse.BodyHandlers.ofString())
                .body();
        assertThat(post(
                                http,
                                "/parked/skip",
                                Map.of(
                                        "instance",
                                        serviceManagement.toString(),
                                        "id",
                                        parked.toString(),
                                        "_csrf",
                                        csrf(page)))
                        .statusCode())
                .isEqualTo(302);
        assertThat(jdbc.queryForObject(
                        "SELECT skipped_at IS NOT NULL FROM outbox_event WHERE id = ?", Boolean.class, parked))
                .isTrue();
    }

    /**
     * Publishes a message straight into the dead-letter queue, as a neighbour allowed to write there could: a real
     * dead letter's headers (its exception's message, and a trace whose first application frame is the cause's).
     */
    private static void publishToDeadLetters(EventEnvelope<ParcelWeighed> event, String cause) throws Exception {
        String frame = cause.substring(cause.indexOf(" at ") + " at ".length());
        Map<String, Object> headers = Map.of(
                "x-exception-message",
                "The scale is offline",
                "x-exception-stacktrace",
                "java.lang.IllegalStateException: The scale is offline\n\tat " + frame + "(GuardedService.java)\n",
                "x-original-exchange",
                DESTINATION,
                "x-original-routingKey",
                ParcelWeighed.NAME);
        try (com.rabbitmq.client.Connection connection = rabbit.newConnection();
                com.rabbitmq.client.Channel channel = connection.createChannel()) {
            channel.confirmSelect();
            channel.basicPublish(
                    "",
                    QUEUE + ".dlq",
                    new com.rabbitmq.client.AMQP.BasicProperties.Builder()
                            .headers(headers)
                            .deliveryMode(2)
                            .build(),
                    new EnvelopeCodec().encode(event));
            channel.waitForConfirmsOrDie(10_000);
        }
    }

    /** Saves what the browser shows to {@code target/console-screenshots/<name>.png}, and says where. */
    private void screenshot(String name) throws Exception {
        Path file = Path.of("target", "console-screenshots", name + ".png");
        Files.createDirectories(file.getParent());
        Files.write(file, ((TakesScreenshot) this.browser).getScreenshotAs(OutputType.BYTES));
        logger.info("Screenshot of {}: {}", this.browser.getCurrentUrl(), file.toAbsolutePath());
    }

    private void signIn(String user, String password) {
        this.browser.get(url("/"));
        this.browser.findElement(By.name("username")).sendKeys(user);
        this.browser.findElement(By.name("password")).sendKeys(password);
        this.browser.findElement(By.cssSelector("button[type='submit']")).click();
        assertThat(this.browser.findElement(By.tagName("h1")).getText()).isEqualTo("Services");
    }

    private void lookUp(String id) {
        this.browser.get(url("/events"));
        this.browser.findElement(By.name("id")).sendKeys(id);
        this.browser.findElement(By.id("look-up")).click();
    }

    private void assertNoAlert() {
        try {
            String text = this.browser.switchTo().alert().getText();
            throw new AssertionError("A script of the page ran: alert '" + text + "'");
        } catch (NoAlertPresentException expected) {
            // No script ran.
        }
    }

    private String url(String path) {
        return "http://127.0.0.1:" + this.port + path;
    }

    /** An HTTP client signed in as the user, through the login form and its CSRF token, following no redirect. */
    private HttpClient signedIn(String user, String password) throws Exception {
        HttpClient http = HttpClient.newBuilder()
                .cookieHandler(new CookieManager())
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
        String loginPage = http.send(
                        HttpRequest.newBuilder(URI.create(url("/login"))).build(), HttpResponse.BodyHandlers.ofString())
                .body();
        post(http, "/login", Map.of("username", user, "password", password, "_csrf", csrf(loginPage)));
        return http;
    }

    private HttpResponse<String> post(HttpClient http, String path, Map<String, String> form) throws Exception {
        String body = form.entrySet().stream()
                .map(field ->
                        URLEncoder.encode(field.getKey(), UTF_8) + "=" + URLEncoder.encode(field.getValue(), UTF_8))
                .collect(Collectors.joining("&"));
        return http.send(
                HttpRequest.newBuilder(URI.create(url(path)))
                        .header("Content-Type", "application/x-www-form-urlencoded")
                        .POST(HttpRequest.BodyPublishers.ofString(body))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static String csrf(String page) {
        Matcher token = Pattern.compile("name=\"_csrf\"[^>]*value=\"([^\"]+)\"").matcher(page);
        assertThat(token.find()).as("a CSRF token in the page").isTrue();
        return token.group(1);
    }

    private static EventEnvelope<ParcelWeighed> parcel(int grams) {
        return new EventEnvelope<>(
                UuidV7.generate(), ParcelWeighed.NAME, Instant.now(), new ParcelWeighed(UUID.randomUUID(), grams));
    }

    /** An outbox row the relay parked, as the service's outbox holds one after the broker refused it for good. */
    private static UUID parkARow(String key, String lastError) {
        UUID id = UuidV7.generate();
        jdbc.update(
                "INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload, attempts, last_error, parked_at)"
                        + " VALUES (?, ?, ?, 'console.parcel.labelled.v1', '{}'::jsonb, 5, ?, now())",
                id,
                DESTINATION,
                key,
                lastError);
        return id;
    }
}
