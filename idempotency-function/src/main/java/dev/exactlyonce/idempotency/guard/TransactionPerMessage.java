package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.internal.BatchMessages;
import dev.exactlyonce.idempotency.internal.Failures;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.jdbc.TransactionBounds;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.DatabaseOutageClassifier;
import dev.exactlyonce.idempotency.outage.GuardStatementFailed;
import dev.exactlyonce.idempotency.outage.OutageException;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import dev.exactlyonce.idempotency.outage.OutageMet;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Runs each message of a guarded binding in a database transaction of its own: {@code preSend} begins it once no
 * {@link ConsumptionHalt} halts consumption, {@code postSend} commits (a failed commit throws out of {@code send}, so
 * the binder does not acknowledge), {@code afterSendCompletion} rolls back what did not commit ({@link OutageGiveBack}
 * for an outage). See docs/design.md, "How it works".
 */
final class TransactionPerMessage implements ChannelInterceptor, MessageTransaction.Recovery {

    private static final Logger logger = LoggerFactory.getLogger(TransactionPerMessage.class);

    private final @Nullable EventRoutes routes;

    private final GuardedBinding binding;

    private final PlatformTransactionManager transactionManager;

    private final DataSource dataSource;

    private final ConsumptionHalt halt;

    private final TransactionDefinition definition;

    private final IdempotencyMetrics metrics;

    private final @Nullable Outbox outbox;

    /** Whether transactions begin on a connection bound beforehand ({@link #beginOnABoundedConnection()}). */
    private final boolean bindsTheConnection;

    /** The connection this thread's transaction was begun on, when bound beforehand: released once it completed. */
    private static final ThreadLocal<Connection> BOUND = new ThreadLocal<>();

    TransactionPerMessage(
            GuardedBinding binding,
            PlatformTransactionManager transactionManager,
            DataSource dataSource,
            ConsumptionHalt halt,
            IdempotencyMetrics metrics,
            @Nullable Outbox outbox,
            @Nullable EventRoutes routes) {
        this.binding = binding;
        this.routes = routes;
        this.outbox = outbox;
        this.transactionManager = transactionManager;
        this.dataSource = dataSource;
        this.halt = halt;
        this.metrics = metrics;
        this.bindsTheConnection = !halt.socketTimeout().isZero()
                && transactionManager instanceof DataSourceTransactionManager manager
                && manager.getDataSource() == dataSource;
        DefaultTransactionDefinition definition = new DefaultTransactionDefinition();
        definition.setName(binding.definition());
        this.definition = definition;
    }

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        MessageTransaction.rollBackAbandoned();
        releaseConnection();
        if (TransactionSynchronizationManager.hasResource(this.dataSource)) {
            throw new IdempotencyException(("The thread delivering a message of %s already runs a transaction on the"
                            + " service's DataSource: the message would join it, and its claim would commit or roll"
                            + " back with work that is not its own. Deliver guarded messages on a thread without a"
                            + " database transaction (the binder's consumer threads have none)")
                    .formatted(this.binding.bindingName()));
        }
        this.halt.beginDelivery(message);
        MessageTransaction.open(this.binding, this.transactionManager, begin(), this.outbox, this.routes, this);
        logger.debug("Began the transaction of a message of {}", this.binding.bindingName());
        return message;
    }

    /**
     * Begins the message's transaction once consumption is not halted, or throws {@link OutageException} once held
     * {@code max-hold}, to give the delivery back. A failure to begin is an outage, whatever its SQLSTATE.
     */
    private TransactionStatus begin() {
        while (true) {
            // Asked only during a halt: nothing of the hold is worked out for a message while consumption runs.
            if (this.halt.halt() != null && !this.halt.awaitEnd(this.binding.bindingName())) {
                throw new OutageException(
                        ("A message of %s was held while a dependency is unavailable (max-hold %s from its first"
                                        + " attempt, none where the binding is paused): given back to the broker, to"
                                        + " be delivered again")
                                .formatted(this.binding.bindingName(), this.halt.maxHold()),
                        null);
            }
            try {
                if (this.bindsTheConnection) {
                    return beginOnABoundedConnection();
                }
                TransactionStatus transaction = this.transactionManager.getTransaction(this.definition);
                bound();
                return transaction;
            } catch (RuntimeException ex) {
                GuardStatementFailed failure = GuardStatementFailed.begin(this.binding.bindingName(), ex);
                this.halt.onOutage(failure);
                if (this.halt.isStopping()) {
                    // Nothing halts while the service stops: the attempt fails, as any other.
                    throw failure;
                }
                // Halted (or resumed meanwhile, by a message that committed): held, or tried again at once.
            }
        }
    }

    /**
     * An outage (or the probe's claim failing too) rolls back and begins again in the same attempt, so an interceptor
     * after this one must not count on the transaction its {@code preSend} ran in. A conflict, the message's own
     * failure, or an outage while the service stops, is thrown.
     */
    @Override
    public TransactionStatus beginAgain(TransactionStatus failed, RuntimeException failure) {
        RuntimeException outage = failure;
        if (!this.halt.isOutage(failure)) {
            if (DatabaseOutageClassifier.isConflict(failure) || Failures.find(failure, SQLException.class) == null) {
                throw failure;
            }
            // Rolled back first: the probe takes a connection of its own, and the pool may have no other.
            rollBack(failed, false);
            if (!this.halt.failsTheGuardsWrite()) {
                throw failure;
            }
            outage = GuardStatementFailed.claim(this.binding.bindingName(), failure);
        }
        this.halt.onOutage(outage);
        rollBack(failed, true);
        if (this.halt.isStopping()) {
            throw outage;
        }
        logger.debug(
                "The claim of a message of {} met an outage: the message is held, and its transaction begun again"
                        + " once the database answers",
                this.binding.bindingName());
        return begin();
    }

    /**
     * Takes a connection, bounds its network wait ({@code socket-timeout}) and binds it before the manager begins on
     * it: MariaDB's driver sends the begin to the server, which on a silent network would wait for TCP's timeout.
     */
    private TransactionStatus beginOnABoundedConnection() {
        Connection connection;
        try {
            connection = this.dataSource.getConnection();
        } catch (SQLException ex) {
            throw new CannotGetJdbcConnectionException("Failed to obtain JDBC Connection", ex);
        }
        BOUND.set(connection);
        try {
            connection.setNetworkTimeout(
                    Runnable::run, (int) this.halt.socketTimeout().toMillis());
            TransactionSynchronizationManager.bindResource(this.dataSource, new ConnectionHolder(connection));
            return this.transactionManager.getTransaction(this.definition);
        } catch (SQLException ex) {
            releaseConnection();
            throw new CannotCreateTransactionException("Could not bound the connection's network wait", ex);
        } catch (RuntimeException ex) {
            releaseConnection();
            throw ex;
        }
    }

    private void releaseConnection() {
        Connection connection = BOUND.get();
        if (connection == null) {
            return;
        }
        BOUND.remove();
        TransactionSynchronizationManager.unbindResourceIfPossible(this.dataSource);
        DataSourceUtils.releaseConnection(connection, this.dataSource);
    }

    /**
     * Bounds how long a statement of this transaction waits for the database's answer (the pool resets it), so that a
     * silent network is an outage; the claim bounds it on the server ({@link TransactionBounds}).
     */
    private void bound() {
        Duration timeout = this.halt.socketTimeout();
        if (timeout.isZero()) {
            return;
        }
        try {
            DataSourceUtils.getConnection(this.dataSource).setNetworkTimeout(Runnable::run, (int) timeout.toMillis());
        } catch (SQLException | RuntimeException ex) {
            logger.debug(
                    "Could not bound the network wait of a message of {}: {}",
                    this.binding.bindingName(),
                    ex.toString());
        }
    }

    /** An outage met after the claim is not the message's fault: its attempt is not counted ({@link OutageMet}). */
    @Override
    public RuntimeException thrown(RuntimeException failure) {
        return this.halt.isOutage(failure) && Failures.find(failure, OutageMet.class) == null
                ? new OutageMet(failure)
                : failure;
    }

    @Override
    public void postSend(Message<?> message, MessageChannel channel, boolean sent) {
        MessageTransaction invocation = current();
        try {
            this.transactionManager.commit(invocation.transaction());
        } catch (RuntimeException ex) {
            throw thrown(ex);
        } finally {
            releaseConnection();
        }
        answered(invocation);
        if (invocation.claimed() > 0) {
            this.metrics.processed(this.binding, invocation.claimed());
        }
        if (invocation.duplicates() > 0) {
            this.metrics.duplicates(this.binding, invocation.duplicates());
        }
        if (!invocation.rejected().isEmpty()) {
            int size = message.getPayload() instanceof List<?> batch ? batch.size() : 1;
            if (size == 1) {
                // A batch of one: rejected as a single message is, without retry.
                throw invocation.rejected().values().iterator().next();
            }
            // The rest of the batch committed: the messages set aside are dead-lettered, the batch not retried.
            throw new PartlyFailedBatch(this.binding.bindingName(), size, invocation.rejected());
        }
    }

    @Override
    public void afterSendCompletion(
            Message<?> message, MessageChannel channel, boolean sent, @Nullable Exception failure) {
        MessageTransaction invocation = current();
        if (failure == null && !BatchMessages.isPartOfBatch(message)) {
            // Committed: the delivery ended (a message of a batch tried alone is the batch's, which goes on).
            this.halt.endDelivery();
        }
        boolean outage = failure != null && this.halt.isOutage(failure);
        if (outage) {
            this.halt.onOutage(failure);
        } else if (failure != null) {
            answered(invocation);
        }
        // Counted once, when dead-lettered, not on each attempt at a batch that rolled back.
        if (failure != null && Failures.find(failure, PartlyFailedBatch.class) != null) {
            invocation.rejected().forEach((index, rejection) -> rejected(rejection, " (#" + index + " of a batch)"));
        } else if (failure != null && Failures.find(failure, RejectedMessageException.class) != null) {
            rejected(Failures.find(failure, RejectedMessageException.class), "");
        }
        try {
            rollBack(invocation.transaction(), outage);
        } finally {
            invocation.close();
        }
    }

    /** The message ended without an outage: the database works if its claim went through, else it says nothing. */
    private void answered(MessageTransaction invocation) {
        if (invocation.reachedTheDatabase()) {
            this.halt.onSuccess();
        } else {
            this.halt.untried();
        }
    }

    private void rollBack(TransactionStatus transaction, boolean outage) {
        try {
            if (!transaction.isCompleted()) {
                logger.debug("Rolling back the transaction of a message of {}", this.binding.bindingName());
                this.transactionManager.rollback(transaction);
            }
        } catch (TransactionException ex) {
            // The connection is gone (the usual cause): the database has already discarded the transaction.
            if (outage) {
                logger.debug(
                        "Could not roll back the transaction of a message of {}: {}",
                        this.binding.bindingName(),
                        ex.getMessage());
            } else {
                logger.warn(
                        "Could not roll back the transaction of a message of {}: {}",
                        this.binding.bindingName(),
                        ex.getMessage());
            }
        } finally {
            releaseConnection();
        }
    }

    private void rejected(RejectedMessageException rejected, String position) {
        this.metrics.rejected(this.binding, rejected.reason());
        logger.warn(
                "Rejected a message of {}{} without retry, event id {}: {}",
                this.binding.bindingName(),
                position,
                rejected.eventId() != null ? rejected.eventId() : "unknown",
                rejected.getMessage());
    }

    private MessageTransaction current() {
        MessageTransaction invocation = MessageTransaction.current();
        if (invocation == null || invocation.binding() != this.binding) {
            throw new IllegalStateException("No guarded invocation of " + this.binding.bindingName() + " is open");
        }
        return invocation;
    }
}
