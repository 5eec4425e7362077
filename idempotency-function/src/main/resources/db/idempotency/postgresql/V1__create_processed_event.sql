-- The same table as dev/exactlyonce/idempotency/schema-postgresql.sql, with the configured table name.
CREATE TABLE ${table} (
    event_id     uuid        NOT NULL,
    scope        text        NOT NULL DEFAULT '',
    processed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ${table}_pkey PRIMARY KEY (event_id, scope)
);

CREATE INDEX ${table}_processed_at_idx ON ${table} (processed_at);
