-- The same table as dev/exactlyonce/idempotency/schema-postgresql-partitioned.sql, with the configured table name.
CREATE TABLE ${table} (
    event_id     uuid        NOT NULL,
    scope        text        NOT NULL DEFAULT '',
    processed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ${table}_pkey PRIMARY KEY (event_id, scope)
) PARTITION BY RANGE (event_id);
