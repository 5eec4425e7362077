-- The status of each order as shipping last learned it, on MariaDB (db/migration/postgresql holds PostgreSQL's).
CREATE TABLE order_status (
    order_id   UUID         NOT NULL,
    status     VARCHAR(64)  NOT NULL,
    version    BIGINT       NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (order_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
