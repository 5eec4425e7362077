package dev.exactlyonce.paymentprovider;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class PaymentProviderTests {

    private static final String ORDER = """
            {"amount": "24.63", "currency": "EUR", "reference": "order-1"}""";

    private final PaymentProvider provider = PaymentProvider.start(0);

    private final HttpClient http = HttpClient.newHttpClient();

    @AfterEach
    void stop() {
        this.provider.close();
    }

    @Test
    void chargesOncePerKeyAndAnswersARepeatedKeyWithTheFirstAnswer() throws Exception {
        HttpResponse<String> first = charge("key-1", ORDER);
        HttpResponse<String> again = charge("key-1", ORDER);

        assertThat(first.statusCode()).isEqualTo(201);
        assertThat(first.body()).contains("\"id\":\"ch_000001\"", "\"amount\":\"24.63\"", "\"currency\":\"EUR\"");
        assertThat(again.statusCode()).isEqualTo(201);
        assertThat(again.body()).isEqualTo(first.body());
        assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(this.provider.chargeCount()).isEqualTo(1);
        assertThat(this.provider.requestCount()).isEqualTo(2);
    }

    @Test
    void concurrentRequestsWithOneKeyChargeOnce() {
        CompletableFuture.allOf(IntStream.range(0, 8)
                        .mapToObj(i -> CompletableFuture.runAsync(() -> {
                            try {
                                charge("key-2", ORDER);
                            } catch (Exception ex) {
                                throw new IllegalStateException(ex);
                            }
                        }))
                        .toArray(CompletableFuture[]::new))
                .join();

        assertThat(this.provider.chargeCount()).isEqualTo(1);
    }

    @Test
    void aRequestWhoseKeyIsStillBeingProcessedIsRefusedWithAConflict() throws Exception {
        this.provider.processingTime(Duration.ofSeconds(2));
        CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(() -> {
            try {
                return charge("key-5", ORDER);
            } catch (Exception ex) {
                throw new IllegalStateException(ex);
            }
        });
        await().atMost(Duration.ofSeconds(5)).until(() -> this.provider.requestCount() == 1);

        HttpResponse<String> meanwhile = charge("key-5", ORDER);

        assertThat(meanwhile.statusCode()).isEqualTo(409);
        assertThat(first.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
        assertThat(charge("key-5", ORDER).headers().firstValue("Idempotent-Replayed"))
                .hasValue("true");
        assertThat(this.provider.chargeCount()).isEqualTo(1);
    }

    @Test
    void aKeyOlderThanItsLifetimeIsForgottenAndChargesAgain() throws Exception {
        this.provider.keyLifetime(Duration.ZERO);

        charge("key-6", ORDER);
        HttpResponse<String> later = charge("key-6", ORDER);

        assertThat(later.statusCode()).isEqualTo(201);
        assertThat(later.headers().firstValue("Idempotent-Replayed")).isEmpty();
        assertThat(this.provider.chargeCount())
                .as("as real providers do once a key expired")
                .isEqualTo(2);
    }

    @Test
    void findsTheChargesOfAReference() throws Exception {
        charge("key-7", ORDER);
        charge("key-8", ORDER.replace("order-1", "order-2"));

        HttpResponse<String> found = this.http.send(
                HttpRequest.newBuilder(URI.create(this.provider.url() + "/v1/charges?reference=order-2"))
                        .build(),
                HttpResponse.BodyHandlers.ofString());

        assertThat(found.body()).contains("\"idempotencyKey\":\"key-8\"").doesNotContain("key-7");
    }

    @Test
    void aKeyReusedWithOtherParametersIsRefused() throws Exception {
        charge("key-3", ORDER);

        HttpResponse<String> other = charge("key-3", ORDER.replace("24.63", "99.00"));

        assertThat(other.statusCode()).isEqualTo(422);
        assertThat(this.provider.chargeCount()).isEqualTo(1);
    }

    @Test
    void aRequestWithoutKeyIsRefused() throws Exception {
        assertThat(charge(null, ORDER).statusCode()).isEqualTo(400);
        assertThat(this.provider.chargeCount()).isZero();
    }

    @Test
    void listsItsCharges() throws Exception {
        charge("key-4", ORDER);

        HttpResponse<String> list = this.http.send(
                HttpRequest.newBuilder(URI.create(this.provider.url() + "/v1/charges"))
                        .build(),
                HttpResponse.BodyHandlers.ofString());

        assertThat(list.body()).contains("\"idempotencyKey\":\"key-4\"", "\"requests\":1");
    }

    private HttpResponse<String> charge(String key, String body) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(this.provider.url() + "/v1/charges"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null) {
            request.header("Idempotency-Key", key);
        }
        return this.http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }
}
