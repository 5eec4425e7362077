-- The scopes the table holds claims under, on MariaDB. See schema-mariadb.sql.
CREATE TABLE ${table}_scope (
    scope         VARCHAR(255) NOT NULL,
    registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    copied_to     TEXT,
    CONSTRAINT ${table}_scope_pkey PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
