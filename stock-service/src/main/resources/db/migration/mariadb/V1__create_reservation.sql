-- The reservations stock makes for an order's lines, on MariaDB (db/migration/postgresql holds PostgreSQL's).
CREATE TABLE reservation (
    id         UUID           NOT NULL,
    order_id   UUID           NOT NULL,
    product_id UUID           NOT NULL,
    quantity   DECIMAL(12, 3) NOT NULL,
    created_at TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    INDEX reservation_order_id_idx (order_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
