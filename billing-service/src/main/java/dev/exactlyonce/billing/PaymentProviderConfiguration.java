package dev.exactlyonce.billing;

import java.net.URI;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.http.client.ClientHttpRequestFactoryBuilder;
import org.springframework.boot.http.client.HttpClientSettings;
import org.springframework.boot.http.client.HttpRedirects;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.HttpStatusCode;
import org.springframework.web.client.RestClient;

/**
 * The payment provider's client: over https only (unless {@code billing.payment-provider.plain-http-allowed}), following
 * no redirect, with the timeouts of {@code billing.payment-provider.*}.
 */
@Configuration(proxyBeanMethods = false)
class PaymentProviderConfiguration {

    @Bean
    PaymentProviderClient paymentProviderClient(
            RestClient.Builder restClients,
            @Value("${billing.payment-provider.url}") String url,
            @Value("${billing.payment-provider.timeout:5s}") Duration timeout,
            @Value("${billing.payment-provider.in-flight-wait:30s}") Duration inFlightWait,
            @Value("${billing.payment-provider.plain-http-allowed:false}") boolean plainHttpAllowed) {
        URI address = URI.create(url);
        if (!plainHttpAllowed && !"https".equalsIgnoreCase(address.getScheme())) {
            // The charge, its amount and its idempotency key would cross the network unencrypted and unauthenticated:
            // whoever is on the path could read them, or answer in the provider's place.
            // Printed without a user or password the address may hold.
            throw new IllegalStateException(("billing.payment-provider.url is %s: the payment provider must be reached"
                            + " over https. Set an https address, or billing.payment-provider.plain-http-allowed=true"
                            + " where the path to the provider is trusted (the demo's profile does, its provider on"
                            + " this machine)")
                    .formatted(address.getScheme() + "://" + address.getHost()
                            + (address.getPort() >= 0 ? ":" + address.getPort() : "")));
        }
        // No redirect is followed: a 307 would send the charge, its amount and its idempotency key to whatever host
        // the answer names. A redirect is a failure of the attempt, like any answer that is not the provider's.
        HttpClientSettings settings = HttpClientSettings.defaults()
                .withConnectTimeout(timeout)
                .withReadTimeout(timeout)
                .withRedirects(HttpRedirects.DONT_FOLLOW);
        return new PaymentProviderClient(
                restClients
                        .baseUrl(url)
                        .requestFactory(ClientHttpRequestFactoryBuilder.jdk().build(settings))
                        .defaultStatusHandler(HttpStatusCode::is3xxRedirection, (request, response) -> {
                            throw new IllegalStateException(
                                    "The payment provider at %s answered %s to %s %s: redirects are not followed, set"
                                                    .formatted(
                                                            url,
                                                            response.getStatusCode(),
                                                            request.getMethod(),
                                                            request.getURI())
                                            + " billing.payment-provider.url to the address that answers");
                        })
                        .build(),
                inFlightWait);
    }
}
