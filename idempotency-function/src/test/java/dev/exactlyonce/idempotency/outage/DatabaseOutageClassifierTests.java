package dev.exactlyonce.idempotency.outage;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.ConnectException;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.messaging.MessagingException;

/** Which failures are the database's (or a declared dependency's) rather than the message's. */
class DatabaseOutageClassifierTests {

    private final DatabaseOutageClassifier outages = new DatabaseOutageClassifier(List.of(), List.of());

    @ParameterizedTest
    @ValueSource(
            strings = {
                "08000", "08001", "08003", "08006", "57P01", "57P02", "57P03", "53000", "53100", "53200", "53300",
                "53400", "58000", "58030", "25006"
            })
    void theSqlStatesOfAnUnavailableDatabaseAreOutagesWhateverTheyAreWrappedIn(String sqlState) {
        SQLException cause = new SQLException("server said no", sqlState);

        assertThat(this.outages.isOutage(
                        new MessagingException("failed", new DataAccessResourceFailureException("wrapped", cause))))
                .isTrue();
        assertThat(this.outages.isOutage(new IllegalStateException("unexpected", cause)))
                .isTrue();
    }

    @ParameterizedTest
    @ValueSource(strings = {"54000", "23505", "22P02", "40001", "42P01"})
    void theSqlStatesOfAFailureOfTheMessageAreNotWhateverSpringTranslatedThemInto(String sqlState) {
        SQLException cause = new SQLException("about this row", sqlState);

        assertThat(this.outages.isOutage(new DataAccessResourceFailureException("translated", cause)))
                .isFalse();
    }

    /** MariaDB's codes of the database's condition, which come with the general SQLSTATE HY000. */
    @ParameterizedTest
    @ValueSource(ints = {1021, 1037, 1041, 1040, 1053, 1036, 1836, 1792, 1927})
    void mariaDbCodesOfAnUnavailableDatabaseAreOutagesWhateverTheirSqlState(int errorCode) {
        SQLException cause = new SQLException("server said no", "HY000", errorCode);

        assertThat(this.outages.isOutage(new DataAccessResourceFailureException("wrapped", cause)))
                .isTrue();
        assertThat(DatabaseOutageClassifier.isConflict(cause)).isFalse();
    }

    @Test
    void mariaDbRefusingAStatementForAnOptionIsAnOutageWhenTheOptionIsReadOnlyOnly() {
        SQLException readOnly = new SQLException(
                "The MariaDB server is running with the --read-only option so it cannot execute this statement",
                "HY000",
                1290);
        SQLException secureFilePriv = new SQLException(
                "The MariaDB server is running with the --secure-file-priv option so it cannot execute this statement",
                "HY000",
                1290);

        assertThat(this.outages.isOutage(readOnly)).isTrue();
        assertThat(this.outages.isOutage(secureFilePriv)).isFalse();
    }

    @ParameterizedTest
    @ValueSource(ints = {1062, 1452, 1406, 1366, 1146, 1038, 1114})
    void mariaDbCodesOfAFailureOfTheMessageAreNot(int errorCode) {
        SQLException cause = new SQLException("about this row", "HY000", errorCode);

        assertThat(this.outages.isOutage(new DataAccessResourceFailureException("translated", cause)))
                .isFalse();
        assertThat(DatabaseOutageClassifier.isConflict(cause)).isFalse();
    }

    @ParameterizedTest
    @ValueSource(ints = {1205, 1213, 1969})
    void mariaDbCodesOfAConflictWithAnotherTransactionAreConflicts(int errorCode) {
        SQLException cause = new SQLException("lock wait timeout", "HY000", errorCode);

        assertThat(DatabaseOutageClassifier.isConflict(new IllegalStateException(cause)))
                .isTrue();
        assertThat(this.outages.isOutage(cause)).isFalse();
    }

    @Test
    void withoutASqlStateTheConnectionFailuresOfThePoolAndOfSpringAreOutages() {
        assertThat(this.outages.isOutage(new SQLTransientConnectionException("pool timed out")))
                .isTrue();
        assertThat(this.outages.isOutage(new CannotGetJdbcConnectionException("no connection")))
                .isTrue();
        assertThat(this.outages.isOutage(new IllegalArgumentException("bad input")))
                .isFalse();
    }

    @Test
    void typesTheServiceDeclaresAreOutagesToo() {
        DatabaseOutageClassifier declared = new DatabaseOutageClassifier(List.of(ConnectException.class), List.of());
        RuntimeException providerDown = new IllegalStateException(new ConnectException("connection refused"));

        assertThat(declared.isOutage(providerDown)).isTrue();
        assertThat(this.outages.isOutage(providerDown)).isFalse();
        assertThat(new DatabaseOutageClassifier(List.of(), List.of(failure -> failure instanceof IllegalStateException))
                        .isOutage(providerDown))
                .isTrue();
    }
}
