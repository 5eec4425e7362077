-- One row per line of a placed order: the quantity of the product held for the order.
CREATE TABLE reservation (
    id         uuid           NOT NULL,
    order_id   uuid           NOT NULL,
    product_id uuid           NOT NULL,
    quantity   numeric(12, 3) NOT NULL,
    created_at timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT reservation_pkey PRIMARY KEY (id)
);

CREATE INDEX reservation_order_id_idx ON reservation (order_id);
