-- The tables the idempotency guard records processed event ids in, on MariaDB 10.7 or later (the UUID type, INSERT
-- ... RETURNING). Services that migrate with Flyway (and flyway-mysql) get them from the library
-- (idempotency.migrate-with-flyway); others run this script with their own tool, renaming the tables if
-- idempotency.table-name says so (processed_event and processed_event_scope become <table> and <table>_scope).
--
-- One row per event id this service processed, written in the transaction of the business effect. scope is '' when
-- the key is the event id alone (the default, idempotency.key-scope=service), or the function's name when each
-- function keeps its own record (idempotency.key-scope=function). event_name is the event's name: an id claimed by an
-- event of another name does not make an event a duplicate. processed_at drives the purge. claim_token is the random
-- token of the claim that inserted the row: a claim that reads back its own token inserted the row, any other is a
-- duplicate (MariaDB's row counts cannot tell them apart). The binary collation without padding compares names and
-- scopes exactly, trailing spaces included. Names and scopes have at most 255 characters.
CREATE TABLE processed_event (
    event_id     UUID         NOT NULL,
    scope        VARCHAR(255) NOT NULL DEFAULT '',
    event_name   VARCHAR(255) NOT NULL DEFAULT '',
    processed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    claim_token  BIGINT       NOT NULL DEFAULT 0,
    CONSTRAINT processed_event_pkey PRIMARY KEY (event_id, scope, event_name),
    INDEX processed_event_processed_at_idx (processed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The scopes processed_event holds claims under, registered by the guard at start-up (see schema-postgresql.sql).
CREATE TABLE processed_event_scope (
    scope         VARCHAR(255) NOT NULL,
    registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    copied_to     TEXT,
    CONSTRAINT processed_event_scope_pkey PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The outbox runs on PostgreSQL only, in this version: a service on MariaDB has no outbox_event table, and its relay
-- stays off.
