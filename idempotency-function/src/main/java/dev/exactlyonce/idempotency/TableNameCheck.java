package dev.exactlyonce.idempotency;

import java.util.Set;
import java.util.regex.Pattern;

/**
 * Checks {@code idempotency.table-name} before it is formatted into any SQL: an unquoted lower-case identifier, not
 * reserved, short enough for each derived name to fit PostgreSQL's 63 bytes (it cuts longer ones: two could clash).
 */
final class TableNameCheck {

    static final int MAX_LENGTH = 63 - "_processed_at_idx".length();

    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]*");

    /** PostgreSQL's reserved key words (categories R and T of {@code pg_get_keywords()}), never a table name. */
    private static final Set<String> RESERVED = Set.of(
            "all",
            "analyse",
            "analyze",
            "and",
            "any",
            "array",
            "as",
            "asc",
            "asymmetric",
            "authorization",
            "binary",
            "both",
            "case",
            "cast",
            "check",
            "collate",
            "collation",
            "column",
            "concurrently",
            "constraint",
            "create",
            "cross",
            "current_catalog",
            "current_date",
            "current_role",
            "current_schema",
            "current_time",
            "current_timestamp",
            "current_user",
            "default",
            "deferrable",
            "desc",
            "distinct",
            "do",
            "else",
            "end",
            "except",
            "false",
            "fetch",
            "for",
            "foreign",
            "freeze",
            "from",
            "full",
            "grant",
            "group",
            "having",
            "ilike",
            "in",
            "initially",
            "inner",
            "intersect",
            "into",
            "is",
            "isnull",
            "join",
            "lateral",
            "leading",
            "left",
            "like",
            "limit",
            "localtime",
            "localtimestamp",
            "natural",
            "not",
            "notnull",
            "null",
            "offset",
            "on",
            "only",
            "or",
            "order",
            "outer",
            "overlaps",
            "placing",
            "primary",
            "references",
            "returning",
            "right",
            "select",
            "session_user",
            "similar",
            "some",
            "symmetric",
            "table",
            "tablesample",
            "then",
            "to",
            "trailing",
            "true",
            "union",
            "unique",
            "user",
            "using",
            "variadic",
            "verbose",
            "when",
            "where",
            "window",
            "with");

    private TableNameCheck() {}

    /** Throws IllegalArgumentException, saying what to change, when the name cannot be used as it is. */
    static void check(String tableName) {
        if (tableName == null || !IDENTIFIER.matcher(tableName).matches()) {
            throw new IllegalArgumentException(("idempotency.table-name must be a lower-case SQL identifier (letters,"
                            + " digits and underscores, not starting with a digit), but was '%s'")
                    .formatted(tableName));
        }
        if (tableName.length() > MAX_LENGTH) {
            throw new IllegalArgumentException(("idempotency.table-name '%s' has %d characters; it must have at most %d"
                            + " characters, so that the names derived from it (%s_processed_at_idx, %s_pYYYYMMDD"
                            + " for partitions, ...) fit PostgreSQL's 63 and never collide")
                    .formatted(tableName, tableName.length(), MAX_LENGTH, tableName, tableName));
        }
        if (RESERVED.contains(tableName)) {
            throw new IllegalArgumentException(("idempotency.table-name '%s' is a reserved word of PostgreSQL, which"
                            + " cannot name a table without quotes: choose another name, such as %s_event")
                    .formatted(tableName, tableName));
        }
    }
}
