-- The order service's own tables on MariaDB; its outbox is the library's outbox_event (schema-mariadb.sql).
CREATE TABLE orders (
    id          UUID         NOT NULL,
    customer_id UUID         NOT NULL,
    currency    CHAR(3)      NOT NULL,
    status      VARCHAR(64)  NOT NULL,
    version     BIGINT       NOT NULL,
    created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE order_line (
    order_id   UUID           NOT NULL,
    line       INT            NOT NULL,
    product_id UUID           NOT NULL,
    quantity   DECIMAL(12, 3) NOT NULL,
    unit_price DECIMAL(12, 2) NOT NULL,
    PRIMARY KEY (order_id, line),
    CONSTRAINT order_line_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
