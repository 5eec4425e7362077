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
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.Ordered;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.TransactionExecution;
import org.springframework.transaction.TransactionExecutionListener;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Emits events through the outbox: each is written to {@code outbox_event} as the caller's transaction commits, with a
 * UUID v7 event id made now, and published by the relay after. Outside a transaction, {@code emit} refuses. See
 * docs/outbox.md.
 */
public final class Outbox {

    private static final Logger logger = LoggerFactory.getLogger(Outbox.class);

    private static final TransactionExecutionListener TRANSACTIONS = new Transactions();

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
     * Writes an event in the caller's transaction, for the destination {@code idempotency.outbox.destination}.
     *
     * @param eventName the event's name (its routing key), such as {@code stock.stock.reserved.v1}
     * @param key what the event is about (the aggregate's id): events of one key are published in the order written
     * @param payload the event's own fields, written as a JSON object
     * @return the event's id
     * @throws IllegalStateException when no transaction on the service's DataSource is under way
     * @throws IllegalArgumentException when the name is not an event name ({@link OutgoingEvent})
     */
    public UUID emit(String eventName, String key, Object payload) {
        return emit(new OutgoingEvent(eventName, key, payload));
    }

    /**
     * Writes the event in the caller's transaction, for the destination {@code idempotency.outbox.destination}.
     *
     * @return the event's id
     * @throws IllegalStateException when no transaction on the service's DataSource is under way
     */
    public UUID emit(OutgoingEvent event) {
        return write(this.destination, List.of(event)).get(0);
    }

    /**
     * Publishes again, in order and with their ids, the events written in a period and not purged yet.
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

    /**
     * Writes each transaction's rows as it commits; the library adds it to every transaction manager bean. Add it to a
     * manager you create yourself ({@code manager.addListener(Outbox.transactionListener())}), or {@code emit} refuses.
     */
    public static TransactionExecutionListener transactionListener() {
        return TRANSACTIONS;
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
        Written written = (Written) TransactionSynchronizationManager.getResource(Written.class);
        if (written == null) {
            throw new IllegalStateException("Outbox.emit was called in a transaction begun by a transaction manager"
                    + " the outbox does not follow, so it could not tell whether its commit has begun: declare the"
                    + " manager as a bean (the library adds its listener to every one), or add"
                    + " Outbox.transactionListener() to it");
        }
        if (written.closed) {
            throw new IllegalStateException("Outbox.emit was called once the transaction's commit or rollback began"
                    + " (from an afterCommit or afterCompletion callback, or a @TransactionalEventListener of such"
                    + " a phase): the event can no longer be written with its effect. Emit before the commit, or"
                    + " from a @TransactionalEventListener(phase = BEFORE_COMMIT)");
        }
        written.outbox = this;
        List<UUID> ids = new ArrayList<>(events.size());
        Instant now = Instant.now();
        for (OutgoingEvent event : events) {
            UUID id = UuidV7.generate();
            written.rows.add(new OutboxStatements.Row(
                    id,
                    destination,
                    event.key(),
                    event.name(),
                    this.codec.writePayload(event.payload()).toString(),
                    now));
            ids.add(id);
        }
        return ids;
    }

    private void insert(List<OutboxStatements.Row> rows) {
        OutboxStatements.of(Dialect.of(this.dataSource)).insert(this.jdbc, rows);
    }

    /**
     * Binds a {@link Written} to each new transaction, closes it as the commit or rollback begins (an emit then
     * throws), and inserts its rows once the callbacks before the commit ran.
     */
    private static final class Transactions implements TransactionExecutionListener {

        @Override
        public void afterBegin(TransactionExecution transaction, @Nullable Throwable beginFailure) {
            if (beginFailure == null
                    && transaction.isNewTransaction()
                    && TransactionSynchronizationManager.isSynchronizationActive()) {
                Written written = new Written();
                TransactionSynchronizationManager.unbindResourceIfPossible(Written.class);
                TransactionSynchronizationManager.bindResource(Written.class, written);
                TransactionSynchronizationManager.registerSynchronization(written);
            }
        }

        @Override
        public void beforeCommit(TransactionExecution transaction) {
            Written written = written(transaction);
            if (written != null) {
                written.closed = true;
                written.insert(transaction);
            }
        }

        @Override
        public void beforeRollback(TransactionExecution transaction) {
            Written written = written(transaction);
            if (written != null) {
                written.closed = true;
            }
        }

        @Override
        public void afterCommit(TransactionExecution transaction, @Nullable Throwable commitFailure) {
            unbind(transaction);
        }

        @Override
        public void afterRollback(TransactionExecution transaction, @Nullable Throwable rollbackFailure) {
            unbind(transaction);
        }

        /** Once every callback of the completion ran: an emit from one of them found the transaction closed. */
        private static void unbind(TransactionExecution transaction) {
            if (transaction.isNewTransaction()) {
                TransactionSynchronizationManager.unbindResourceIfPossible(Written.class);
            }
        }

        /** The rows of the transaction, when it is a transaction of its own (not a savepoint of one). */
        private static @Nullable Written written(TransactionExecution transaction) {
            return transaction.isNewTransaction()
                    ? (Written) TransactionSynchronizationManager.getResource(Written.class)
                    : null;
        }
    }

    /** The rows a transaction wrote: inserted as it commits, then counted, and the relay woken up. */
    private static final class Written implements TransactionSynchronization {

        private final List<OutboxStatements.Row> rows = new ArrayList<>();

        private @Nullable Outbox outbox;

        /** Whether the commit or rollback began: nothing more can be written. */
        private boolean closed;

        /** How many rows were written when each savepoint was set: a rollback to it drops the rows written since. */
        private final Map<Object, Integer> savepoints = new IdentityHashMap<>();

        /** Flushes (JPA) before the insert: a flush never waits for a row lock while holding a key's lock. */
        void insert(TransactionExecution transaction) {
            if (this.outbox != null && !this.rows.isEmpty()) {
                if (transaction instanceof TransactionStatus status) {
                    status.flush();
                }
                this.outbox.insert(this.rows);
            }
        }

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
            // An inner transaction (REQUIRES_NEW) writes, counts and wakes the relay for its own rows.
            TransactionSynchronizationManager.unbindResourceIfPossible(Written.class);
        }

        @Override
        public void resume() {
            TransactionSynchronizationManager.unbindResourceIfPossible(Written.class);
            TransactionSynchronizationManager.bindResource(Written.class, this);
        }

        @Override
        public void afterCommit() {
            if (this.outbox == null || this.rows.isEmpty()) {
                return;
            }
            // The transaction committed: nothing here may fail its caller, who would retry and emit a second time.
            try {
                this.outbox.metrics.outboxWritten(this.rows.size());
                this.outbox.afterCommit.run();
            } catch (RuntimeException ex) {
                logger.warn("Could not wake the outbox relay up after a commit; it polls: {}", ex.toString());
            }
        }

        @Override
        public void afterCompletion(int status) {
            // Also when the commit failed before the listener saw it begin; first of the callbacks (its order).
            this.closed = true;
        }

        @Override
        public int getOrder() {
            return Ordered.HIGHEST_PRECEDENCE;
        }
    }
}
