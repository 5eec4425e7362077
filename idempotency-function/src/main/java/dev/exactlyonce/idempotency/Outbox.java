package dev.exactlyonce.idempotency;

import dev.exactlyonce.idempotency.envelope.UuidV7;
import java.sql.Connection;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Emits events through the outbox: each is written to the {@code outbox_event} table in the caller's database
 * transaction, with its event id (a UUID v7) made now, and published by the relay once that transaction committed. A
 * transaction that rolls back leaves no row and publishes nothing; a row published twice (the relay stopped between
 * publishing and marking it) carries the same event id, so the consumer's guard discards the copy.
 *
 * <p>From a guarded {@code Consumer}, it joins the message's transaction; from a REST controller or any other code,
 * the {@code @Transactional} method's. Outside a transaction on the service's DataSource it refuses: the row would
 * commit alone, whatever happened to the effect. A guarded {@code Function} returns its events instead.
 */
public final class Outbox {

    /**
     * Takes the key's transaction-level advisory lock before the row gets its position: two transactions that write
     * events of one key then take their positions in the order they commit, and the relay, which publishes by
     * position, publishes them in that order too (without it, a transaction that wrote first but committed last would
     * have its event published after the other's, or before it, depending on when the relay ran).
     */
    private static final String INSERT = """
            INSERT INTO outbox_event (id, aggregatetype, aggregateid, type, payload)
            SELECT ?, ?, ?, ?, ?::jsonb FROM (SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))) AS key_lock""";

    private static final Logger logger = LoggerFactory.getLogger(Outbox.class);

    private static final String REPUBLISH = """
            UPDATE outbox_event SET published_at = NULL
            WHERE occurred_at >= ? AND occurred_at < ? AND published_at IS NOT NULL""";

    private final DataSource dataSource;

    private final JdbcTemplate jdbc;

    private final EnvelopeCodec codec;

    private final String destination;

    private final Runnable afterCommit;

    private final IdempotencyMetrics metrics;

    Outbox(
            DataSource dataSource,
            EnvelopeCodec codec,
            String destination,
            Runnable afterCommit,
            IdempotencyMetrics metrics) {
        this.dataSource = dataSource;
        this.jdbc = new JdbcTemplate(dataSource);
        this.codec = codec;
        this.destination = destination;
        this.afterCommit = afterCommit;
        this.metrics = metrics;
    }

    /**
     * Writes an event to the outbox, in the caller's transaction, for the destination {@code idempotency.outbox.destination}.
     *
     * @param eventName the event's name (its routing key), such as {@code stock.stock.reserved.v1}
     * @param key what the event is about (the aggregate's id): events of one key are published in the order written
     * @param payload the event's own fields, written as a JSON object
     * @return the event's id
     * @throws IllegalStateException when no transaction on the service's DataSource is under way
     */
    public UUID emit(String eventName, String key, Object payload) {
        return emit(new OutgoingEvent(eventName, key, payload));
    }

    /**
     * Writes an event to the outbox, in the caller's transaction, for the destination {@code idempotency.outbox.destination}.
     *
     * @return the event's id
     * @throws IllegalStateException when no transaction on the service's DataSource is under way
     */
    public UUID emit(OutgoingEvent event) {
        return write(this.destination, List.of(event)).get(0);
    }

    /**
     * Publishes again the events written in a period (an operator replaying it after an incident downstream): their
     * rows are marked unpublished, and the relay publishes them again, in order, with the ids they were written with,
     * so that a consumer that applied them discards the copies. Rows already purged are gone
     * ({@code idempotency.outbox.retention}).
     *
     * @param from the start of the period, included
     * @param to its end, excluded
     * @return how many events will be published again
     */
    public int republish(Instant from, Instant to) {
        int rows = this.jdbc.update(REPUBLISH, Timestamp.from(from), Timestamp.from(to));
        this.afterCommit.run();
        return rows;
    }

    /** Writes events for a destination in the transaction under way; returns their ids, in order. */
    List<UUID> write(String destination, List<OutgoingEvent> events) {
        if (!TransactionSynchronizationManager.isActualTransactionActive()
                || !TransactionSynchronizationManager.hasResource(this.dataSource)
                // A transaction of another resource can leave a connection of the DataSource bound in auto-commit.
                || !Boolean.FALSE.equals(this.jdbc.execute((ConnectionCallback<Boolean>) Connection::getAutoCommit))) {
            throw new IllegalStateException(("Outbox.emit writes the event in the transaction of its effect, and no"
                    + " transaction on the service's DataSource is under way: call it from a guarded function,"
                    + " or from a @Transactional method"));
        }
        List<UUID> ids = new ArrayList<>(events.size());
        for (OutgoingEvent event : events) {
            UUID id = UuidV7.generate();
            this.jdbc.update(
                    INSERT,
                    id,
                    destination,
                    event.key(),
                    event.name(),
                    this.codec.writePayload(event.payload()).toString(),
                    destination,
                    event.key());
            ids.add(id);
        }
        Written written = (Written) TransactionSynchronizationManager.getResource(this);
        if (written == null) {
            written = new Written();
            TransactionSynchronizationManager.bindResource(this, written);
            TransactionSynchronizationManager.registerSynchronization(written);
        }
        written.rows += events.size();
        return ids;
    }

    /** The rows a transaction wrote: counted, and the relay woken up, once it committed. */
    private final class Written implements TransactionSynchronization {

        private int rows;

        @Override
        public void suspend() {
            // An inner transaction (REQUIRES_NEW) counts and wakes the relay for its own rows.
            TransactionSynchronizationManager.unbindResourceIfPossible(Outbox.this);
        }

        @Override
        public void resume() {
            TransactionSynchronizationManager.bindResource(Outbox.this, this);
        }

        @Override
        public void afterCommit() {
            // The transaction committed: nothing here may fail its caller, who would retry and emit a second time.
            try {
                Outbox.this.metrics.outboxWritten(this.rows);
                Outbox.this.afterCommit.run();
            } catch (RuntimeException ex) {
                logger.warn("Could not wake the outbox relay up after a commit; it polls: {}", ex.toString());
            }
        }

        @Override
        public void afterCompletion(int status) {
            TransactionSynchronizationManager.unbindResourceIfPossible(Outbox.this);
        }
    }
}
