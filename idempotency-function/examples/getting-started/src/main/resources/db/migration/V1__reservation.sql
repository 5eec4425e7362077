-- The service's own table. The library's tables (processed_event, the outbox) come with its own migrations.
CREATE TABLE reservation (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id   uuid           NOT NULL,
    product_id uuid           NOT NULL,
    quantity   numeric(12, 3) NOT NULL
);
