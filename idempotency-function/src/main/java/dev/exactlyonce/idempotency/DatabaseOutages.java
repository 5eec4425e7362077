package dev.exactlyonce.idempotency;

import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.transaction.CannotCreateTransactionException;

/**
 * The database's outages, found anywhere in a failure's chain of causes (and among suppressed exceptions):
 *
 * <ul>
 *   <li>an {@link SQLException} whose SQLSTATE is of class 08 (connection exception), 57P01, 57P02 or 57P03 (the
 *       server shuts down or cannot connect now), 53300 (too many connections) or 25006 (read-only transaction: a
 *       replica promoted, or a primary demoted, after a failover); the SQLSTATE is read, whatever exception Spring
 *       translated it into;
 *   <li>an {@link SQLTransientConnectionException} (the pool's timeout waiting for a connection);
 *   <li>Spring's {@link CannotGetJdbcConnectionException}, {@link CannotCreateTransactionException} and
 *       {@link DataAccessResourceFailureException};
 *   <li>the types listed in {@code idempotency.outage.exceptions}, and what the service's {@link OutageClassifier}
 *       beans recognize.
 * </ul>
 */
final class DatabaseOutages implements OutageClassifier {

    private static final Set<String> SQL_STATES = Set.of("57P01", "57P02", "57P03", "53300", "25006");

    private static final List<Class<? extends Throwable>> TYPES = List.of(
            SQLTransientConnectionException.class,
            CannotGetJdbcConnectionException.class,
            CannotCreateTransactionException.class,
            DataAccessResourceFailureException.class);

    private final List<Class<? extends Throwable>> declared;

    private final List<OutageClassifier> classifiers;

    DatabaseOutages(List<Class<? extends Throwable>> declared, List<OutageClassifier> classifiers) {
        this.declared = List.copyOf(declared);
        this.classifiers = List.copyOf(classifiers);
    }

    @Override
    public boolean isOutage(Throwable failure) {
        return matches(failure, 0) || this.classifiers.stream().anyMatch(classifier -> classifier.isOutage(failure));
    }

    private boolean matches(Throwable failure, int depth) {
        int level = depth;
        for (Throwable cause = failure; cause != null && level < 32; cause = next(cause), level++) {
            if (isOutageItself(cause)) {
                return true;
            }
            for (Throwable suppressed : cause.getSuppressed()) {
                if (matches(suppressed, level + 1)) {
                    return true;
                }
            }
        }
        return false;
    }

    private boolean isOutageItself(Throwable failure) {
        return failure instanceof OutageException
                || (failure instanceof SQLException sql && isOutageState(sql.getSQLState()))
                || TYPES.stream().anyMatch(type -> type.isInstance(failure))
                || this.declared.stream().anyMatch(type -> type.isInstance(failure));
    }

    private static @Nullable Throwable next(Throwable cause) {
        if (cause instanceof SQLException sql && sql.getNextException() != null && cause.getCause() == null) {
            return sql.getNextException();
        }
        return cause.getCause() != cause ? cause.getCause() : null;
    }

    static boolean isOutageState(@Nullable String sqlState) {
        return sqlState != null && (sqlState.startsWith("08") || SQL_STATES.contains(sqlState));
    }
}
