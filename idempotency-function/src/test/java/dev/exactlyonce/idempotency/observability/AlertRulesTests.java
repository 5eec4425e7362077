package dev.exactlyonce.idempotency.observability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.PayloadTypes;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.MatchResult;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The alert rules ({@code infra/prometheus/alerts.yml}, and the series their tests feed them) read the meters by the
 * names a service's Prometheus scrape gives them: a meter renamed, or a rule misspelt, would leave an alert that never
 * fires. {@code promtool test rules} checks the rules' logic; this, their names.
 */
class AlertRulesTests {

    private static final Pattern METER = Pattern.compile("idempotency_[a-z_]+");

    @Test
    void everyMeterTheAlertRulesReadIsOneAServiceExposes() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        MicrometerIdempotencyMetrics metrics = new MicrometerIdempotencyMetrics(registry, "processed_event");
        GuardedBinding binding = new GuardedBinding(
                "recordThing-in-0",
                "idempotencyGuard|recordThing",
                List.of("recordThing"),
                PayloadTypes.of(String.class),
                "",
                List.of(),
                false,
                false,
                null,
                false,
                Map.of());
        metrics.processed(binding, 1);
        metrics.duplicates(binding, 1);
        metrics.rejected(binding, Reason.NOT_JSON);
        metrics.purged(true, 1, Duration.ofMillis(1));
        metrics.halted(Instant.now());
        metrics.outboxLag(Duration.ofSeconds(1));
        metrics.outboxParked(1);
        metrics.deadLettersWaiting(1, Instant.now(), Duration.ofDays(14));
        metrics.processedIdsKept(Instant.now(), Duration.ofDays(30));
        Set<String> exposed = registry.scrape()
                .lines()
                .filter(line -> !line.startsWith("#"))
                .map(line -> line.split("[{ ]", 2)[0])
                .collect(Collectors.toSet());

        Set<String> read = readIn("alerts.yml");
        read.addAll(readIn("alerts-test.yml"));

        assertThat(read).hasSizeGreaterThanOrEqualTo(9);
        assertThat(exposed).containsAll(read);
    }

    private static Set<String> readIn(String file) throws Exception {
        String rules = Files.readString(Path.of("..", "infra", "prometheus", file));
        return METER.matcher(rules).results().map(MatchResult::group).collect(Collectors.toCollection(HashSet::new));
    }
}
