-- One invoice per placed order, and the charge the payment provider made for it.
CREATE TABLE invoice (
    id         uuid           NOT NULL,
    order_id   uuid           NOT NULL,
    amount     numeric(19, 4) NOT NULL,
    currency   char(3)        NOT NULL,
    created_at timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT invoice_pkey PRIMARY KEY (id),
    CONSTRAINT invoice_order_id_key UNIQUE (order_id)
);

CREATE TABLE payment (
    invoice_id         uuid           NOT NULL,
    idempotency_key    text           NOT NULL,
    provider_charge_id text           NOT NULL,
    amount             numeric(19, 4) NOT NULL,
    currency           char(3)        NOT NULL,
    status             text           NOT NULL,
    created_at         timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT payment_pkey PRIMARY KEY (invoice_id),
    CONSTRAINT payment_invoice_fkey FOREIGN KEY (invoice_id) REFERENCES invoice (id),
    CONSTRAINT payment_idempotency_key_key UNIQUE (idempotency_key)
);
