-- The table the idempotency guard records processed event ids in: one row per event id this service processed,
-- written in the transaction of the business effect. processed_at drives the purge.
-- Services that migrate with Flyway get this table from the library (idempotency.migrate-with-flyway); others run
-- this script with their own tool, renaming the table if idempotency.table-name says so.
CREATE TABLE processed_event (
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT processed_event_pkey PRIMARY KEY (event_id)
);

CREATE INDEX processed_event_processed_at_idx ON processed_event (processed_at);
