-- The scopes the table holds claims under, on MariaDB. See schema-mariadb.sql. A table created from that script before
-- the service migrated with Flyway has the registry already; the scopes its claims use are registered.
CREATE TABLE IF NOT EXISTS ${table}_scope (
    scope         VARCHAR(255) NOT NULL,
    registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    copied_to     TEXT,
    PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

INSERT INTO ${table}_scope (scope) SELECT DISTINCT scope FROM ${table} ON DUPLICATE KEY UPDATE scope = VALUES(scope);
