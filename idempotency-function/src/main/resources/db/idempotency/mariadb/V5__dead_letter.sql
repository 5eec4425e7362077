-- The events the guard dead-lettered once their route was checked, on MariaDB. See schema-mariadb.sql.
CREATE TABLE IF NOT EXISTS ${table}_dead_letter (
    binding          VARCHAR(255) NOT NULL,
    event_id         UUID         NOT NULL,
    event_name       VARCHAR(255) NOT NULL,
    body_sha256      BINARY(32)   NOT NULL,
    dead_lettered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (binding, event_id, event_name, body_sha256),
    INDEX ${table}_dl_at_idx (dead_lettered_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
