package dev.exactlyonce.paymentprovider;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
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
