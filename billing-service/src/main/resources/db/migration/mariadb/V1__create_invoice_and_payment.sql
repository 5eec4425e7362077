-- Billing's invoices and the payments charged for them, on MariaDB (db/migration/postgresql holds PostgreSQL's).
CREATE TABLE invoice (
    id         UUID           NOT NULL,
    order_id   UUID           NOT NULL,
    amount     DECIMAL(19, 4) NOT NULL,
    currency   CHAR(3)        NOT NULL,
    created_at TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    CONSTRAINT invoice_order_id_key UNIQUE (order_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE payment (
    invoice_id         UUID           NOT NULL,
    idempotency_key    VARCHAR(255)   NOT NULL,
    provider_charge_id VARCHAR(255)   NOT NULL,
    amount             DECIMAL(19, 4) NOT NULL,
    currency           CHAR(3)        NOT NULL,
    status             VARCHAR(64)    NOT NULL,
    created_at         TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (invoice_id),
    CONSTRAINT payment_invoice_fkey FOREIGN KEY (invoice_id) REFERENCES invoice (id),
    CONSTRAINT payment_idempotency_key_key UNIQUE (idempotency_key)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
