package dev.exactlyonce.idempotency.envelope;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class UuidV7Tests {

    @Test
    void carriesItsTimestampVersionAndVariant() {
        Instant instant = Instant.parse("2026-11-29T10:15:30.123Z");

        UUID uuid = UuidV7.at(instant);

        assertThat(uuid.version()).isEqualTo(7);
        assertThat(uuid.variant()).isEqualTo(2);
        assertThat(UuidV7.isV7(uuid)).isTrue();
        assertThat(UuidV7.timestamp(uuid)).isEqualTo(instant);
        assertThat(uuid.toString()).startsWith("01a226cd-7a4b-7");
    }

    @Test
    void idsOfLaterMillisecondsSortAfter() {
        UUID earlier = UuidV7.at(Instant.parse("2026-11-29T10:15:30.123Z"));
        UUID later = UuidV7.at(Instant.parse("2026-11-29T10:15:30.124Z"));

        assertThat(earlier.toString()).isLessThan(later.toString());
    }

    @Test
    void aRandomUuidIsNotV7() {
        assertThat(UuidV7.isV7(UUID.randomUUID())).isFalse();
    }
}
