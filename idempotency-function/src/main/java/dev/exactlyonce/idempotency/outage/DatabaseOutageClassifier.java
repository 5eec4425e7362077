package dev.exactlyonce.idempotency.outage;

import dev.exactlyonce.idempotency.OutageClassifier;
import dev.exactlyonce.idempotency.jdbc.MariaDbDialect;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.core.retry.RetryException;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.transaction.CannotCreateTransactionException;

/**
 * Outages anywhere in a failure's chain: a SQLSTATE of the database's condition, or a connection failure without one;
 * {@link GuardStatementFailed}; and what the service declares. See docs/operations.md, "When things go wrong".
 */
public final class DatabaseOutageClassifier implements OutageClassifier {

    private static final Set<String> SQL_STATES = Set.of("57P01", "57P02", "57P03", "25006");

    private static final Set<String> CONFLICT_STATES = Set.of("40001", "40P01", "55P03", "57014");

    private static final List<Class<? extends Throwable>> TYPES = List.of(
            SQLTransientConnectionException.class,
            CannotGetJdbcConnectionException.class,
            CannotCreateTransactionException.class,
            DataAccessResourceFailureException.class);

    private final List<Class<? extends Throwable>> declared;

    private final List<OutageClassifier> classifiers;

    public DatabaseOutageClassifier(List<Class<? extends Throwable>> declared, List<OutageClassifier> classifiers) {
        this.declared = List.copyOf(declared);
        this.classifiers = List.copyOf(classifiers);
    }

    @Override
    public boolean isOutage(Throwable failure) {
        return matches(failure, 0) || this.classifiers.stream().anyMatch(classifier -> classifier.isOutage(failure));
    }

    /**
     * A SQLSTATE in the chain decides alone: Spring translates classes 53, 54, 57 and 58 into
     * {@code DataAccessResourceFailureException}, and some are the message's own (54000, an index row too big).
     */
    private boolean matches(Throwable failure, int depth) {
        List<SQLException> states = new ArrayList<>();
        if (found(failure, depth, states)) {
            return true;
        }
        return states.isEmpty() ? typed(failure, 0) : states.stream().anyMatch(DatabaseOutageClassifier::isOutageError);
    }

    /** Whether the chain holds an {@link OutageException} or a type the service declared; collects its SQLSTATEs. */
    private boolean found(Throwable failure, int depth, List<SQLException> states) {
        int level = depth;
        for (Throwable cause = failure; cause != null && level < 32; cause = next(cause), level++) {
            if (cause instanceof OutageException
                    || cause instanceof OutageMet
                    || cause instanceof GuardStatementFailed
                    || isDeclared(cause)) {
                return true;
            }
            if (cause instanceof SQLException sql && saysWhy(sql)) {
                states.add(sql);
            }
            for (Throwable suppressed : suppressed(cause)) {
                if (found(suppressed, level + 1, states)) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The exceptions this one suppressed, which tell of the same failure (a failed rollback); none for a
     * {@link RetryException}, whose suppressed ones are its earlier attempts, which say nothing of its cause.
     */
    private static Throwable[] suppressed(Throwable failure) {
        return failure instanceof RetryException ? new Throwable[0] : failure.getSuppressed();
    }

    private boolean isDeclared(Throwable failure) {
        return this.declared.stream().anyMatch(type -> type.isInstance(failure));
    }

    private static boolean typed(Throwable failure, int depth) {
        int level = depth;
        for (Throwable cause = failure; cause != null && level < 32; cause = next(cause), level++) {
            Throwable current = cause;
            if (TYPES.stream().anyMatch(type -> type.isInstance(current))) {
                return true;
            }
        }
        return false;
    }

    private static @Nullable Throwable next(Throwable cause) {
        if (cause instanceof SQLException sql && sql.getNextException() != null && cause.getCause() == null) {
            return sql.getNextException();
        }
        return cause.getCause() != cause ? cause.getCause() : null;
    }

    /** Whether the chain holds a conflict with another transaction, not the message's fault. */
    public static boolean isConflict(Throwable failure) {
        List<SQLException> states = new ArrayList<>();
        collectStates(failure, 0, states);
        return states.stream()
                .anyMatch(sql ->
                        CONFLICT_STATES.contains(sql.getSQLState()) || MariaDbDialect.isConflict(sql.getErrorCode()));
    }

    private static void collectStates(Throwable failure, int depth, List<SQLException> states) {
        int level = depth;
        for (Throwable cause = failure; cause != null && level < 32; cause = next(cause), level++) {
            if (cause instanceof SQLException sql && saysWhy(sql)) {
                states.add(sql);
            }
            for (Throwable suppressed : suppressed(cause)) {
                collectStates(suppressed, level + 1, states);
            }
        }
    }

    /** Whether the exception has a SQLSTATE, or a vendor's code (PostgreSQL's driver gives none: 0). */
    private static boolean saysWhy(SQLException sql) {
        return sql.getSQLState() != null || sql.getErrorCode() != 0;
    }

    private static boolean isOutageError(SQLException sql) {
        return isOutageState(sql.getSQLState()) || MariaDbDialect.isOutage(sql);
    }

    static boolean isOutageState(@Nullable String sqlState) {
        return sqlState != null
                && (sqlState.startsWith("08")
                        || sqlState.startsWith("53")
                        || sqlState.startsWith("58")
                        || SQL_STATES.contains(sqlState));
    }
}
