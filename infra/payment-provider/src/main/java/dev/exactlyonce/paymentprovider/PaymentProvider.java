package dev.exactlyonce.paymentprovider;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A payment provider over HTTP that charges once per {@code Idempotency-Key}, as real providers do.
 *
 * <ul>
 *   <li>{@code POST /v1/charges} with an {@code Idempotency-Key} header and {@code {"amount": "24.63", "currency":
 *       "EUR", "reference": "..."}}: the first request with a key charges and answers {@code 201} with the charge;
 *       a repeated key with the same body answers the first answer again, with {@code Idempotent-Replayed: true};
 *       a repeated key with another body answers {@code 422}; no key answers {@code 400};
 *   <li>{@code GET /v1/charges}: every charge made, and how many charge requests were received.
 * </ul>
 *
 * <p>Charges live in memory for the life of the process. Run it with
 * {@code java -jar infra/payment-provider/target/payment-provider-*-exec.jar [port]} (default 8090).
 */
public final class PaymentProvider implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(PaymentProvider.class);

    private static final JsonMapper json = JsonMapper.builder().build();

    private record Answer(int status, String body, JsonNode request) {}

    private final HttpServer server;

    private final Map<String, Answer> answers = new LinkedHashMap<>();

    private final List<Map<String, Object>> charges = new ArrayList<>();

    private final AtomicInteger requests = new AtomicInteger();

    private PaymentProvider(HttpServer server) {
        this.server = server;
        server.createContext("/v1/charges", this::handle);
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
    }

    /** Starts a provider on the port (0 for any free port). */
    public static PaymentProvider start(int port) {
        try {
            return new PaymentProvider(HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0));
        } catch (IOException ex) {
            throw new UncheckedIOException("Could not listen on port " + port, ex);
        }
    }

    public static void main(String[] args) {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 8090;
        PaymentProvider provider = start(port);
        logger.info("Payment provider listening on http://127.0.0.1:{}/v1/charges", provider.port());
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
        Answer answer;
        boolean replayed;
        synchronized (this) {
            Answer first = this.answers.get(key);
            replayed = first != null;
            if (first == null) {
                answer = newCharge(key, request);
                this.answers.put(key, answer);
            } else if (!first.request().equals(request)) {
                answer = new Answer(
                        422, "{\"error\": \"this Idempotency-Key was used with other parameters\"}", request);
            } else {
                answer = first;
            }
        }
        logger.info("Charge request with key {}: {}{}", key, answer.status(), replayed ? " (replayed)" : "");
        respond(exchange, answer.status(), answer.body(), replayed);
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
        return new Answer(201, json.writeValueAsString(charge), request);
    }

    private void list(HttpExchange exchange) throws IOException {
        String body;
        synchronized (this) {
            body = json.writeValueAsString(Map.of("charges", this.charges, "requests", this.requests.get()));
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
