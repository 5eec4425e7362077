-- The order service's own tables on PostgreSQL (orders-mariadb.sql: on MariaDB); its outbox is the library's
-- outbox_event (schema-postgresql.sql).
CREATE TABLE orders (
    id          uuid        PRIMARY KEY,
    customer_id uuid        NOT NULL,
    currency    char(3)     NOT NULL,
    status      text        NOT NULL,
    version     bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE order_line (
    order_id   uuid           NOT NULL REFERENCES orders (id),
    line       int            NOT NULL,
    product_id uuid           NOT NULL,
    quantity   numeric(12, 3) NOT NULL,
    unit_price numeric(12, 2) NOT NULL,
    PRIMARY KEY (order_id, line)
);
