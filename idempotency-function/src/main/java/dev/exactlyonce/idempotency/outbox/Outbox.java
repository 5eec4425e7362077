package dev.exactlyonce.idempotency.outbox;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.envelope.UuidV7;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import java.sql.Connection;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
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
 *
 * <p>The rows of a transaction are written together when it commits (its {@code beforeCommit}), after locking the
 * transaction's keys, in a stable order, until the commit ({@link OutboxStatements#insert}): two transactions that
 * write events of one key take their positions in the order they commit; two that write the same keys in opposite
 * orders cannot deadlock; an inner transaction ({@code REQUIRES_NEW}) never waits for a lock its suspended outer
 * transaction holds; and a transaction of any number of keys takes at most {@value #KEY_LOCKS} locks. See
 * {@code docs/outbox.md}.
 */
public final class Outbox {

    /** The most key locks a transaction takes: keys share them, so that a batch of many keys cannot fill the lock table. */
    static final int KEY_LOCKS = 256;

    private static final Logger logger = LoggerFactory.getLogger(Outbox.class);

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
        int rows = OutboxStatements.of(Dialect.of(this.dataSource))
                .republish(this.jdbc, Timestamp.from(from), Timestamp.from(to));
        this.afterCommit.run();
        return rows;
    }

    /** Writes events for a destination in the transaction under way; returns their ids, in order. */
    public List<UUID> write(String destination, List<OutgoingEvent> events) {
        if (!TransactionSynchronizationManager.isActualTransactionActive()
                || !TransactionSynchronizationManager.hasResource(this.dataSource)
                // A transaction of another resource can leave a connection of the DataSource bound in auto-commit.
                || !Boolean.FALSE.equals(this.jdbc.execute((ConnectionCallback<Boolean>) Connection::getAutoCommit))) {
            throw new IllegalStateException(("Outbox.emit writes the event in the transaction of its effect, and no"
                    + " transaction on the service's DataSource is under way: call it from a guarded function,"
                    + " or from a @Transactional method"));
        }
        Written written = (Written) TransactionSynchronizationManager.getResource(this);
        if (written == null) {
            written = new Written();
            TransactionSynchronizationManager.bindResource(this, written);
            TransactionSynchronizationManager.registerSynchronization(written);
        } else if (written.inserted) {
            throw new IllegalStateException("Outbox.emit was called while the transaction commits (from a callback"
                    + " of its commit, after the outbox wrote its events): emit before the commit begins");
        }
        List<UUID> ids = new ArrayList<>(events.size());
        for (OutgoingEvent event : events) {
            UUID id = UuidV7.generate();
            written.rows.add(new OutboxStatements.Row(
                    id,
                    destination,
                    event.key(),
                    event.name(),
                    this.codec.writePayload(event.payload()).toString()));
            ids.add(id);
        }
        return ids;
    }

    /** Inserts the rows, their keys locked first ({@link OutboxStatements#insert}). */
    private void insert(List<OutboxStatements.Row> rows) {
        OutboxStatements.of(Dialect.of(this.dataSource)).insert(this.jdbc, rows);
    }

    /** The rows a transaction wrote: inserted as it commits, then counted, and the relay woken up. */
    private final class Written implements TransactionSynchronization {

        private final List<OutboxStatements.Row> rows = new ArrayList<>();

        /** Whether the rows were inserted: the commit began. */
        private boolean inserted;

        /** How many rows were written when each savepoint was set: a rollback to it drops the rows written since. */
        private final Map<Object, Integer> savepoints = new IdentityHashMap<>();

        @Override
        public void savepoint(Object savepoint) {
            this.savepoints.put(savepoint, this.rows.size());
        }

        @Override
        public void savepointRollback(Object savepoint) {
            // A savepoint set before the first emit of the transaction is unknown here: every row came after it.
            int written = this.savepoints.getOrDefault(savepoint, 0);
            this.rows.subList(written, this.rows.size()).clear();
        }

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
        public void beforeCommit(boolean readOnly) {
            insert(this.rows);
            this.inserted = true;
        }

        @Override
        public void afterCommit() {
            if (!this.inserted) {
                // Registered while the commit's callbacks ran (a first emit from another beforeCommit): too late to be
                // written, which no exception can tell the caller any more.
                logger.error(
                        "{} event(s) emitted while the transaction committed (from a callback of its commit) were not"
                                + " written to the outbox and will not be published: emit before the commit begins",
                        this.rows.size());
                return;
            }
            // The transaction committed: nothing here may fail its caller, who would retry and emit a second time.
            try {
                Outbox.this.metrics.outboxWritten(this.rows.size());
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
