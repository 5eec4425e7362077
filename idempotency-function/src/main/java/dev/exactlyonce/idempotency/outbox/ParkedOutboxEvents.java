package dev.exactlyonce.idempotency.outbox;

import java.time.Instant;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.util.Assert;

/**
 * The outbox events the relay parked, their keys' later events held back, for an operator to release or skip. See
 * docs/outbox.md ("A row the broker refuses").
 */
public final class ParkedOutboxEvents {

    private static final Logger logger = LoggerFactory.getLogger(ParkedOutboxEvents.class);

    private static final String PARKED = """
            SELECT parked.id, parked.aggregatetype, parked.aggregateid, parked.type, parked.attempts, parked.last_error,
                   parked.occurred_at, parked.parked_at,
                   (SELECT count(*) FROM outbox_event later
                    WHERE later.published_at IS NULL AND later.aggregatetype = parked.aggregatetype
                      AND later.aggregateid = parked.aggregateid AND later.position > parked.position) AS held_back
            FROM outbox_event parked
            WHERE parked.published_at IS NULL AND parked.attempts > 0 AND parked.parked_at IS NOT NULL
            ORDER BY parked.position LIMIT ?""";

    private static final String RELEASE = """
            UPDATE outbox_event SET parked_at = NULL, attempts = 0, next_attempt_at = NULL
            WHERE id = ? AND published_at IS NULL AND parked_at IS NOT NULL""";

    /** A skipped row is marked published, so that the relay leaves it, and keeps its parked_at: it was never sent. */
    private static final String SKIP = """
            UPDATE outbox_event SET published_at = now(), skipped_at = now()
            WHERE id = ? AND published_at IS NULL AND parked_at IS NOT NULL""";

    /**
     * A parked event.
     *
     * @param destination where it is published (exchange or topic)
     * @param attempts how many times the broker refused it
     * @param lastError why, the last time
     * @param writtenAt when its transaction wrote it
     * @param heldBack how many later events of its key wait behind it
     */
    public record Parked(
            UUID id,
            String destination,
            String key,
            String eventName,
            int attempts,
            @Nullable String lastError,
            Instant writtenAt,
            Instant parkedAt,
            long heldBack) {}

    private final JdbcTemplate jdbc;

    private final Runnable changed;

    /** The parked events of the outbox in the DataSource's schema. */
    public ParkedOutboxEvents(DataSource dataSource) {
        this(dataSource, () -> {});
    }

    /** @param changed run after a release or a skip (the relay of this process woken up) */
    ParkedOutboxEvents(DataSource dataSource, Runnable changed) {
        Assert.notNull(dataSource, "dataSource must not be null");
        this.jdbc = new JdbcTemplate(dataSource);
        this.changed = changed;
    }

    /** The parked events, oldest first, up to {@code limit}. */
    public List<Parked> list(int limit) {
        return this.jdbc.query(
                PARKED,
                (row, index) -> new Parked(
                        row.getObject(1, UUID.class),
                        row.getString(2),
                        row.getString(3),
                        row.getString(4),
                        row.getInt(5),
                        row.getString(6),
                        row.getTimestamp(7).toInstant(),
                        row.getTimestamp(8).toInstant(),
                        row.getLong(9)),
                limit);
    }

    /**
     * Releases a parked event: the relay tries it again, with {@code max-attempts} attempts, then its key's later ones.
     *
     * @return whether it was parked
     */
    public boolean release(UUID id) {
        boolean released = this.jdbc.update(RELEASE, id) == 1;
        if (released) {
            logger.info("Outbox event {} released: the relay tries it again", id);
            this.changed.run();
        }
        return released;
    }

    /**
     * Skips a parked event: it is never published, not even by a republication, and its key's later events go on.
     *
     * @return whether it was parked
     */
    public boolean skip(UUID id) {
        boolean skipped = this.jdbc.update(SKIP, id) == 1;
        if (skipped) {
            logger.warn("Outbox event {} skipped by an operator: it will not be published", id);
            this.changed.run();
        }
        return skipped;
    }
}
