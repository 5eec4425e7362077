-- The table the idempotency guard records processed event ids in: one row per event id this service processed,
-- written in the transaction of the business effect. scope is '' when the key is the event id alone (the default,
-- idempotency.key-scope=service), or the function's name when each function keeps its own record
-- (idempotency.key-scope=function). event_name is the event's name: an id claimed by an event of another name does
-- not make an event a duplicate ('' in the rows of versions before it, which count as claims under any name).
-- processed_at drives the purge.
-- Services that migrate with Flyway get this table from the library (idempotency.migrate-with-flyway); others run
-- this script with their own tool, renaming the table if idempotency.table-name says so.
CREATE TABLE processed_event (
    event_id     uuid        NOT NULL,
    scope        text        NOT NULL DEFAULT '',
    processed_at timestamptz NOT NULL DEFAULT now(),
    event_name   text        NOT NULL DEFAULT '',
    CONSTRAINT processed_event_pkey PRIMARY KEY (event_id, scope, event_name)
);

CREATE INDEX processed_event_processed_at_idx ON processed_event (processed_at);

-- The scopes processed_event holds claims under, registered by the guard at start-up: a start-up whose bindings no
-- longer use a scope that still holds claims refuses to run (see idempotency.bindings.<binding>.former-scopes and
-- idempotency.retired-scopes). copied_to names the scopes a former scope's claims were copied to. Renamed with the
-- table: <table>_scope. Added to an existing table, register the scopes it already holds with:
--   INSERT INTO processed_event_scope (scope) SELECT DISTINCT scope FROM processed_event ON CONFLICT DO NOTHING;
CREATE TABLE processed_event_scope (
    scope         text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    copied_to     text,
    CONSTRAINT processed_event_scope_pkey PRIMARY KEY (scope)
);

-- The events the guard dead-lettered once their route was checked: a dead letter moved back to its queue (on
-- RabbitMQ through <queue>.replay) carries no route the broker vouches for, so the guard takes it only when this
-- table holds its binding, id, name and body. A message anyone else put into the queue that way, or one the broker
-- dead-lettered itself (expired, over a length limit), has no row and is refused. Purged once older than
-- idempotency.replay-horizon.dead-letter-retention. Renamed with the table: <table>_dead_letter.
CREATE TABLE processed_event_dead_letter (
    binding          text        NOT NULL,
    event_id         uuid        NOT NULL,
    event_name       text        NOT NULL,
    body_sha256      bytea       NOT NULL,
    dead_lettered_at timestamptz NOT NULL DEFAULT now(),
    -- When a replay of it was applied: a dead letter no longer waiting (a copy of the replay is still taken).
    taken_back_at    timestamptz,
    CONSTRAINT processed_event_dead_letter_pkey PRIMARY KEY (binding, event_id, event_name, body_sha256)
);

CREATE INDEX processed_event_dl_at_idx ON processed_event_dead_letter (dead_lettered_at);

-- The outbox: the events a guarded function returned, or the service emitted with Outbox.emit, written in the
-- transaction of their effect and published by the relay once committed. Its first five columns are the ones
-- Debezium's Outbox Event Router reads by default. One per schema, whatever the table name of processed events.
-- publishable_at, attempts, next_attempt_at, last_error and parked_at are the relay's: when the row became
-- publishable, and, for a row the broker refused, how often, when it is tried again, why, and when it was parked
-- (set aside, its key held back, until an operator releases or skips it); skipped_at is when an operator skipped it.
-- written_xid is the transaction that wrote the row, or made it unpublished again: the relay reads the rows committed
-- since its last read by it.
CREATE TABLE outbox_event (
    id              uuid        NOT NULL,
    aggregatetype   text        NOT NULL,
    aggregateid     text        NOT NULL,
    type            text        NOT NULL,
    payload         jsonb       NOT NULL,
    occurred_at     timestamptz NOT NULL DEFAULT now(),
    position        bigint      GENERATED ALWAYS AS IDENTITY,
    published_at    timestamptz,
    publishable_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_error      text,
    parked_at       timestamptz,
    skipped_at      timestamptz,
    written_xid     bigint      DEFAULT txid_current(),
    CONSTRAINT outbox_event_pkey PRIMARY KEY (id)
);

CREATE INDEX outbox_event_unpublished_idx ON outbox_event (position) WHERE published_at IS NULL;

CREATE INDEX outbox_event_published_at_idx ON outbox_event (published_at) WHERE published_at IS NOT NULL;

CREATE INDEX outbox_event_held_idx ON outbox_event (aggregatetype, aggregateid) WHERE published_at IS NULL AND attempts > 0;

CREATE INDEX outbox_event_pending_key_idx ON outbox_event (aggregatetype, aggregateid, position) WHERE published_at IS NULL;

CREATE INDEX outbox_event_written_xid_idx ON outbox_event (written_xid) WHERE published_at IS NULL;

-- A row made unpublished again (Outbox.republish, or an operator's UPDATE ... SET published_at = NULL) is new to the
-- relay too.
CREATE FUNCTION outbox_event_unpublished() RETURNS trigger LANGUAGE plpgsql
    AS 'BEGIN NEW.written_xid := txid_current(); RETURN NEW; END';

CREATE TRIGGER outbox_event_unpublished BEFORE UPDATE OF published_at ON outbox_event
    FOR EACH ROW WHEN (NEW.published_at IS NULL AND OLD.published_at IS NOT NULL)
    EXECUTE PROCEDURE outbox_event_unpublished();

-- The keys events were written for: a transaction that writes events locks its keys' rows until it commits, so that
-- the events of one key take their positions in the order their transactions commit. Purged after the retention.
CREATE TABLE outbox_key (
    aggregatetype text        NOT NULL,
    aggregateid   text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT outbox_key_pkey PRIMARY KEY (aggregatetype, aggregateid)
);

CREATE INDEX outbox_key_created_at_idx ON outbox_key (created_at);

-- Who publishes the outbox: the library's relay ('relay'), or another process such as Debezium ('external').
-- Registered by the first instance to start; an instance whose idempotency.outbox.relay.enabled disagrees refuses
-- to start. One row at most.
CREATE TABLE outbox_publisher (
    publisher     text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    single        boolean     NOT NULL DEFAULT true,
    CONSTRAINT outbox_publisher_pkey PRIMARY KEY (single),
    CONSTRAINT outbox_publisher_single CHECK (single),
    CONSTRAINT outbox_publisher_publisher CHECK (publisher IN ('relay', 'external'))
);
