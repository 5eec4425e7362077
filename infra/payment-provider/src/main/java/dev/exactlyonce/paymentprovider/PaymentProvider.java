package dev.exactlyonce.paymentprovider;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A payment provider over HTTP that charges once per {@code Idempotency-Key}, as real providers do, with their
 * limits: a key is remembered for a while only (Stripe keeps keys 24 hours), and a request whose key is still being
 * processed is refused rather than waited for.
 *
 * <ul>
 *   <li>{@code POST /v1/charges} with an {@code Idempotency-Key} header and {@code {"amount": "24.63", "currency":
 *       "EUR", "reference": "..."}}: the first request with a key charges and answers {@code 201} with the charge;
 *       a repeated key with the same body answers the first answer again, with {@code Idempotent-Replayed: true};
 *       a repeated key while the first request is still being processed answers {@code 409}; a repeated key with
 *       another body answers {@code 422}; no key, or a currency it cannot charge ({@code XXX}, {@code XTS}), answers
 *       {@code 400}. Once a key is older than the key lifetime, it
 *       is forgotten: a request with it charges again;
 *   <li>{@code GET /v1/charges}: every charge made, and how many charge requests were received;
 *       {@code GET /v1/charges?reference=...}: the charges of that reference (a search, as providers offer on their
 *       charges' metadata).
 * </ul>
 *
 * <p>Charges live in memory for the life of the process. Run it with
 * {@code java -jar infra/payment-provider/target/payment-provider-*-exec.jar [port] [key lifetime]} (default 8090 and
 * {@code PT24H}, an ISO-8601 duration).
 */
public final class PaymentProvider implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(PaymentProvider.class);

    private static final JsonMapper json = JsonMapper.builder().build();

    /** How long a key is remembered unless told otherwise: Stripe's 24 hours. */
    public static final Duration DEFAULT_KEY_LIFETIME = Duration.ofHours(24);

    /** ISO 4217's codes of no currency ({@code XXX}) and of tests ({@code XTS}): a charge in either answers 400. */
    private static final Set<String> UNCHARGEABLE_CURRENCIES = Set.of("XXX", "XTS");

    private record Answer(int status, String body, JsonNode request, Instant at) {}

    private final HttpServer server;

    private final Map<String, Answer> answers = new LinkedHashMap<>();

    private final Set<String> inFlight = new HashSet<>();

    private volatile Duration keyLifetime = DEFAULT_KEY_LIFETIME;

    private volatile Duration processingTime = Duration.ZERO;

    private final List<Map<String, Object>> charges = new ArrayList<>();

    private final AtomicInteger requests = new AtomicInteger();

    private volatile boolean refusing;

    private PaymentProvider(HttpServer server) {
        this.server = server;
        server.createContext("/v1/charges", this::handle);
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
    }

    /** Starts a provider on the port (0 for any free port). */
    public static PaymentProvider start(int port) {
        // The JDK's HttpServer leaves Nagle's algorithm on: its response, written in two parts, then waits for the
        // client's delayed acknowledgement, about 40 ms on Linux, on every charge (a JDK HttpClient saw 55 ms per
        // charge, against 3 ms from curl). Read once, when the server's configuration is first loaded.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        try {
            return new PaymentProvider(HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0));
        } catch (IOException ex) {
            throw new UncheckedIOException("Could not listen on port " + port, ex);
        }
    }

    public static void main(String[] args) {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 8090;
        PaymentProvider provider = start(port);
        if (args.length > 1) {
            provider.keyLifetime(Duration.parse(args[1]));
        }
        logger.info(
                "Payment provider listening on http://127.0.0.1:{}/v1/charges; idempotency keys kept {}",
                provider.port(),
                provider.keyLifetime);
    }

    /** How long a key is remembered after its first request: a request with an older key charges again. */
    public void keyLifetime(Duration keyLifetime) {
        this.keyLifetime = keyLifetime;
    }

    /**
     * Whether it refuses every charge ({@code 403}, the account may not charge now), before processing it: the key is
     * not kept, and the same request once it charges again makes the charge, as a provider does for an account it
     * restricted for a while.
     */
    public void refuseCharges(boolean refusing) {
        this.refusing = refusing;
    }

    /** How long a new charge takes to process, during which its key is in flight. */
    public void processingTime(Duration processingTime) {
        this.processingTime = processingTime;
    }

    /** The port it listens on. */
    public int port() {
        return this.server.getAddress().getPort();
    }

    /** Its base URL, for example {@code http://127.0.0.1:8090}. */
    public String url() {
        return "http://127.0.0.1:" + port();
    }

    /** How many charges it made. */
    public synchronized int chargeCount() {
        return this.charges.size();
    }

    /** How many charge requests it received, repeated keys included. */
    public int requestCount() {
        return this.requests.get();
    }

    @Override
    public void close() {
        this.server.stop(0);
        ((ExecutorService) this.server.getExecutor()).shutdownNow();
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            switch (exchange.getRequestMethod()) {
                case "POST" -> charge(exchange);
                case "GET" -> list(exchange);
                default -> respond(exchange, 405, "{\"error\": \"use GET or POST\"}", false);
            }
        }
    }

    private void charge(HttpExchange exchange) throws IOException {
        this.requests.incrementAndGet();
        String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
        if (key == null || key.isBlank()) {
            respond(exchange, 400, "{\"error\": \"an Idempotency-Key header is required\"}", false);
            return;
        }
        JsonNode request;
        try {
            request = json.readTree(exchange.getRequestBody().readAllBytes());
            new BigDecimal(request.get("amount").asString());
            request.get("currency").asString();
        } catch (RuntimeException ex) {
            respond(exchange, 400, "{\"error\": \"expected {amount, currency, reference}\"}", false);
            return;
        }
        if (UNCHARGEABLE_CURRENCIES.contains(request.get("currency").asString())) {
            respond(exchange, 400, "{\"error\": \"the currency cannot be charged\"}", false);
            return;
        }
        if (this.refusing) {
            respond(exchange, 403, "{\"error\": \"this account may not charge now\"}", false);
            return;
        }
        Answer answer;
        boolean replayed = false;
        synchronized (this) {
            Answer first = this.answers.get(key);
            if (first != null && first.at().plus(this.keyLifetime).isBefore(Instant.now())) {
                this.answers.remove(key);
                first = null;
            }
            if (first != null) {
                replayed = first.request().equals(request);
                answer = replayed
                        ? first
                        : new Answer(
                                422,
                                "{\"error\": \"this Idempotency-Key was used with other parameters\"}",
                                request,
                                Instant.now());
            } else if (!this.inFlight.add(key)) {
                answer = new Answer(
                        409,
                        "{\"error\": \"a request with this Idempotency-Key is being processed; retry later\"}",
                        request,
                        Instant.now());
            } else {
                answer = null;
            }
        }
        if (answer == null) {
            answer = process(key, request);
        }
        logger.debug("Charge request with key {}: {}{}", key, answer.status(), replayed ? " (replayed)" : "");
        respond(exchange, answer.status(), answer.body(), replayed);
    }

    /** Makes the charge, taking the processing time, while the key is in flight. */
    private Answer process(String key, JsonNode request) {
        try {
            Thread.sleep(this.processingTime.toMillis());
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        synchronized (this) {
            Answer answer = newCharge(key, request);
            this.answers.put(key, answer);
            this.inFlight.remove(key);
            return answer;
        }
    }

    private Answer newCharge(String key, JsonNode request) {
        Map<String, Object> charge = new LinkedHashMap<>();
        charge.put("id", "ch_%06d".formatted(this.charges.size() + 1));
        charge.put("amount", request.get("amount").asString());
        charge.put("currency", request.get("currency").asString());
        charge.put("reference", request.path("reference").asString(""));
        charge.put("idempotencyKey", key);
        charge.put("status", "succeeded");
        this.charges.add(charge);
        return new Answer(201, json.writeValueAsString(charge), request, Instant.now());
    }

    private void list(HttpExchange exchange) throws IOException {
        String query = exchange.getRequestURI().getQuery();
        String reference = query != null && query.startsWith("reference=") ? query.substring(10) : null;
        String body;
        synchronized (this) {
            List<Map<String, Object>> charges = this.charges.stream()
                    .filter(charge -> reference == null || reference.equals(charge.get("reference")))
                    .toList();
            body = json.writeValueAsString(Map.of("charges", charges, "requests", this.requests.get()));
        }
        respond(exchange, 200, body, false);
    }

    private static void respond(HttpExchange exchange, int status, String body, boolean replayed) throws IOException {
        byte[] bytes = body.getBytes(UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "application/json");
        if (replayed) {
            exchange.getResponseHeaders().set("Idempotent-Replayed", "true");
        }
        exchange.sendResponseHeaders(status, bytes.length);
        exchange.getResponseBody().write(bytes);
    }
}
