package dev.exactlyonce.console;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.deadletters.DeadLetterReplay.Outcome;
import dev.exactlyonce.deadletters.DeadLetterReplay.Verdict;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * What the console makes of the services' records before it replays a dead letter: replayed only where a service that
 * consumes the queue still waits for it within its retention; else skipped or refused, with the reason.
 */
class DeadLetterVerdictTests {

    private static final Instant NOW = Instant.parse("2026-12-05T12:00:00Z");

    private static final URI STOCK = URI.create("http://127.0.0.1:9081");

    private static final URI BILLING = URI.create("http://127.0.0.1:9083");

    private static final Map<URI, Duration> RETENTIONS =
            Map.of(STOCK, Duration.ofDays(14), BILLING, Duration.ofDays(14));

    @Test
    void aDeadLetterAServiceWaitsForWithinItsRetentionIsReplayed() {
        Verdict verdict =
                DeadLetterActions.verdict(List.of(lookup(BILLING, deadLetteredDaysAgo(2, null))), RETENTIONS, NOW);

        assertThat(verdict).isNull();
    }

    @Test
    void aDeadLetterOlderThanTheRetentionIsSkippedAsTooOld() {
        Verdict verdict =
                DeadLetterActions.verdict(List.of(lookup(BILLING, deadLetteredDaysAgo(15, null))), RETENTIONS, NOW);

        assertThat(verdict).isNotNull();
        assertThat(verdict.outcome()).isEqualTo(Outcome.SKIPPED);
        assertThat(verdict.reason()).startsWith("too old for the replay horizon: billing-service dead-lettered it at ");
    }

    @Test
    void aDeadLetterWhoseReplayWasAppliedIsSkipped() {
        Verdict verdict = DeadLetterActions.verdict(
                List.of(lookup(
                        BILLING, deadLetteredDaysAgo(2, NOW.minusSeconds(60).toString()))),
                RETENTIONS,
                NOW);

        assertThat(verdict).isNotNull();
        assertThat(verdict.outcome()).isEqualTo(Outcome.SKIPPED);
        assertThat(verdict.reason()).contains("applied a replay of it");
    }

    @Test
    void aMessageNoServiceRecordedIsRefused() {
        Verdict verdict = DeadLetterActions.verdict(List.of(lookup(BILLING), lookup(STOCK)), RETENTIONS, NOW);

        assertThat(verdict).isNotNull();
        assertThat(verdict.outcome()).isEqualTo(Outcome.REFUSED);
        assertThat(verdict.reason()).startsWith("no service recorded dead-lettering it");
    }

    @Test
    void whileAServiceDoesNotAnswerItsDeadLettersAreSkippedNotRefused() {
        ServiceEndpoints.Lookup silent = new ServiceEndpoints.Lookup(
                "billing-service", BILLING, List.of(), List.of(), null, "connection refused");

        Verdict verdict = DeadLetterActions.verdict(List.of(silent), RETENTIONS, NOW);

        assertThat(verdict).isNotNull();
        assertThat(verdict.outcome()).isEqualTo(Outcome.SKIPPED);
        assertThat(verdict.reason()).contains("did not answer");
    }

    @Test
    void aRecordWhoseRetentionIsUnknownIsSkippedRatherThanReplayed() {
        Verdict verdict =
                DeadLetterActions.verdict(List.of(lookup(BILLING, deadLetteredDaysAgo(20, null))), Map.of(), NOW);

        assertThat(verdict).isNotNull();
        assertThat(verdict.outcome()).isEqualTo(Outcome.SKIPPED);
        assertThat(verdict.reason()).startsWith("could not read when billing-service dead-lettered it");
    }

    private static ServiceEndpoints.Lookup lookup(URI url, ServiceEndpoints.DeadLetter... deadLetters) {
        return new ServiceEndpoints.Lookup(
                url.equals(STOCK) ? "stock-service" : "billing-service",
                url,
                List.of(),
                List.of(deadLetters),
                null,
                null);
    }

    private static ServiceEndpoints.DeadLetter deadLetteredDaysAgo(int days, String takenBackAt) {
        return new ServiceEndpoints.DeadLetter(
                "idempotencyGuardinvoiceOrder-in-0",
                NOW.minus(Duration.ofDays(days)).toString(),
                takenBackAt);
    }
}
