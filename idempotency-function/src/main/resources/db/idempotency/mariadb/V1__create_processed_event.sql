-- The processed event ids of the service, on MariaDB (10.7 or later): what schema-mariadb.sql creates, with the table
-- named by idempotency.table-name. See schema-mariadb.sql for what each column means.
CREATE TABLE ${table} (
    event_id     UUID         NOT NULL,
    scope        VARCHAR(255) NOT NULL DEFAULT '',
    event_name   VARCHAR(255) NOT NULL DEFAULT '',
    processed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    claim_token  BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (event_id, scope, event_name),
    INDEX ${table}_processed_at_idx (processed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
