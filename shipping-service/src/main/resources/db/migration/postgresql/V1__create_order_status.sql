-- The shipping service's copy of each order's status: the newest version it has seen.
CREATE TABLE order_status (
    order_id   uuid        NOT NULL,
    status     text        NOT NULL,
    version    bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT order_status_pkey PRIMARY KEY (order_id)
);
