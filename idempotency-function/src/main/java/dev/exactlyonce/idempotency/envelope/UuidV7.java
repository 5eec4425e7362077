package dev.exactlyonce.idempotency.envelope;

import java.security.SecureRandom;
import java.time.Instant;
import java.util.UUID;
import org.springframework.util.Assert;

/**
 * UUID version 7 (RFC 9562): 48 bits of Unix time in milliseconds, then random bits. Ids made in order sort in
 * time order, which keeps a primary-key index compact. Producers use them as event ids.
 */
public final class UuidV7 {

    private static final SecureRandom random = new SecureRandom();

    private UuidV7() {}

    public static UUID generate() {
        return at(Instant.now());
    }

    /** A new version 7 UUID whose timestamp is the given instant (to the millisecond). */
    public static UUID at(Instant instant) {
        long millis = instant.toEpochMilli();
        Assert.isTrue(millis >= 0 && millis < (1L << 48), "instant must lie between 1970 and 10889");
        long randomA = random.nextInt(1 << 12);
        long randomB = random.nextLong();
        long most = (millis << 16) | (0x7L << 12) | randomA;
        long least = (randomB & 0x3FFF_FFFF_FFFF_FFFFL) | 0x8000_0000_0000_0000L;
        return new UUID(most, least);
    }

    public static boolean isV7(UUID uuid) {
        return uuid.version() == 7 && uuid.variant() == 2;
    }

    /** The instant a version 7 UUID carries. */
    public static Instant timestamp(UUID uuid) {
        Assert.isTrue(isV7(uuid), () -> uuid + " is not a version 7 UUID");
        return Instant.ofEpochMilli(uuid.getMostSignificantBits() >>> 16);
    }
}
