package dev.exactlyonce.idempotency.jdbc;

import javax.sql.DataSource;
import org.springframework.jdbc.core.JdbcTemplate;

/** Whether a table is there, in the schema the service's connections use. */
public final class TableName {

    private TableName() {}

    public static boolean exists(JdbcTemplate jdbc, String table) {
        DataSource dataSource = jdbc.getDataSource();
        if (dataSource == null) {
            throw new IllegalStateException("A JdbcTemplate without a DataSource");
        }
        return Dialect.of(dataSource).tableExists(jdbc, null, table);
    }
}
