package dev.exactlyonce.stock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.context.TestPropertySource;

/**
 * Actuator answers on a management port of its own, never on the application's, and the {@code idempotency}
 * endpoint's write operation (the purge, which deletes rows) exists only where a property enables it.
 */
@SpringBootTest(
        webEnvironment = WebEnvironment.RANDOM_PORT,
        properties = {"spring.cloud.stream.default-binder=test", "management.server.port=0"})
@EnableIdempotencyTestKit
class ManagementEndpointsTests {

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("management").registerDataSource(registry);
    }

    private final HttpClient http = HttpClient.newHttpClient();

    @LocalServerPort
    int port;

    @LocalManagementPort
    int managementPort;

    @Test
    void actuatorAnswersOnTheManagementPortOnly() throws Exception {
        assertThat(this.managementPort).isNotEqualTo(this.port);
        assertThat(get(this.managementPort, "/actuator/health")).isEqualTo(200);
        assertThat(get(this.managementPort, "/actuator/idempotency")).isEqualTo(200);
        assertThat(get(this.port, "/actuator/health")).isEqualTo(404);
        assertThat(get(this.port, "/actuator/idempotency")).isEqualTo(404);
    }

    @Autowired
    JdbcTemplate jdbcTemplate;

    @Test
    void anEventIsLookedUpByItsId() throws Exception {
        UUID claimed = claimProcessedDaysAgo(this.jdbcTemplate, 1);

        HttpResponse<String> found = getBody(this.managementPort, "/actuator/idempotency/" + claimed);
        assertThat(found.statusCode()).isEqualTo(200);
        assertThat(found.body())
                .contains("\"eventId\":\"" + claimed + "\"")
                .contains("\"eventName\":\"order.order.placed.v1\"");
        assertThat(getBody(this.managementPort, "/actuator/idempotency/" + UUID.randomUUID())
                        .body())
                .contains("\"claims\":[]");
        assertThat(get(this.managementPort, "/actuator/idempotency/not-an-id")).isEqualTo(400);
    }

    @Test
    void thePurgeCannotBeRunThroughTheEndpointUnlessEnabled() throws Exception {
        UUID expired = claimProcessedDaysAgo(this.jdbcTemplate, 31);

        assertThat(post(this.managementPort, "/actuator/idempotency")).isEqualTo(405);
        assertThat(claims(this.jdbcTemplate, expired)).as("nothing purged").isOne();
    }

    @Nested
    @TestPropertySource(properties = "management.endpoint.idempotency.access=unrestricted")
    class WithThePurgeEnabled {

        @LocalManagementPort
        int managementPort;

        @Autowired
        JdbcTemplate jdbcTemplate;

        @Test
        void thePurgeRunsThroughTheEndpoint() throws Exception {
            UUID expired = claimProcessedDaysAgo(this.jdbcTemplate, 31);
            UUID kept = claimProcessedDaysAgo(this.jdbcTemplate, 29);

            assertThat(post(this.managementPort, "/actuator/idempotency")).isEqualTo(200);
            assertThat(claims(this.jdbcTemplate, expired))
                    .as("the claim older than the retention (30 days), purged")
                    .isZero();
            assertThat(claims(this.jdbcTemplate, kept))
                    .as("the claim within it, kept")
                    .isOne();
            // The status says when this instance last purged, and what.
            assertThat(getBody(this.managementPort, "/actuator/idempotency").body())
                    .containsPattern("\"lastPurge\":\\{\"at\":\"[^\"]+\",\"ran\":true,\"rowsDeleted\":[1-9]");
        }
    }

    private static UUID claimProcessedDaysAgo(JdbcTemplate jdbcTemplate, int days) {
        UUID eventId = UUID.randomUUID();
        jdbcTemplate.update(
                "INSERT INTO processed_event (event_id, event_name, processed_at)"
                        + " VALUES (?, 'order.order.placed.v1', now() - make_interval(days => ?))",
                eventId,
                days);
        return eventId;
    }

    private static int claims(JdbcTemplate jdbcTemplate, UUID eventId) {
        Integer count = jdbcTemplate.queryForObject(
                "SELECT count(*) FROM processed_event WHERE event_id = ?", Integer.class, eventId);
        return count != null ? count : 0;
    }

    private HttpResponse<String> getBody(int port, String path) throws Exception {
        return this.http.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private int get(int port, String path) throws Exception {
        return this.http
                .send(
                        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                                .build(),
                        HttpResponse.BodyHandlers.discarding())
                .statusCode();
    }

    private int post(int port, String path) throws Exception {
        return this.http
                .send(
                        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                                .POST(HttpRequest.BodyPublishers.noBody())
                                .build(),
                        HttpResponse.BodyHandlers.discarding())
                .statusCode();
    }
}
