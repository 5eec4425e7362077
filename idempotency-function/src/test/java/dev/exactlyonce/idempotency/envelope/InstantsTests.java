package dev.exactlyonce.idempotency.envelope;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link Instants#parse} reads what {@link Instant#parse} reads, as it reads it, and refuses what it refuses. */
class InstantsTests {

    @Test
    void readsTheInstantsProducersWriteAsInstantParseDoes() {
        Random random = new Random(20261201);
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 20_000; i++) {
            Instant instant = Instant.ofEpochSecond(
                    random.nextLong(-62_167_219_200L, 253_402_300_799L), random.nextInt(1_000_000_000));
            texts.add(instant.toString());
            // Any number of fraction digits, 0 to 9, as other producers write them.
            String whole = instant.toString().substring(0, 19);
            String nanos = "%09d".formatted(instant.getNano());
            texts.add(whole + (i % 10 == 0 ? "" : "." + nanos.substring(0, i % 10)) + "Z");
        }
        texts.forEach(InstantsTests::readsAsInstantParse);
        assertThat(texts)
                .as("read without Instant.parse, whose formatter is what the fast path saves")
                .allSatisfy(text -> assertThat(Instants.parseUtc(text)).isNotNull());
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "2024-02-29T12:00:00Z",
                "2023-02-29T12:00:00Z",
                "2100-02-29T00:00:00Z",
                "2000-02-29T00:00:00Z",
                "2026-04-31T00:00:00Z",
                "2026-12-31T23:59:60Z",
                "2026-12-31T24:00:00Z",
                "2026-13-01T00:00:00Z",
                "2026-00-01T00:00:00Z",
                "2026-01-00T00:00:00Z",
                "2026-01-01T00:60:00Z",
                "0000-01-01T00:00:00Z",
                "+12026-01-01T00:00:00Z",
                "2026-11-30t10:15:30z",
                "2026-11-30T10:15:30.Z",
                "2026-11-30T10:15:30.1234567890Z",
                "2026-11-30T10:15:30+01:00",
                "2026-11-30T10:15:30.5+01:00",
                "2026-11-30 10:15:30Z",
                "2026-11-30T10:15Z",
                "2026-11-3OT10:15:30Z",
                "2026-11-30T10:15:30",
                "",
                "not an instant"
            })
    void readsOrRefusesEveryOtherTextAsInstantParseDoes(String text) {
        readsAsInstantParse(text);
    }

    private static void readsAsInstantParse(String text) {
        Object expected;
        try {
            expected = Instant.parse(text);
        } catch (DateTimeParseException ex) {
            expected = DateTimeParseException.class;
        }
        Object actual;
        try {
            actual = Instants.parse(text);
        } catch (DateTimeParseException ex) {
            actual = DateTimeParseException.class;
        }
        assertThat(actual).as(text).isEqualTo(expected);
    }
}
