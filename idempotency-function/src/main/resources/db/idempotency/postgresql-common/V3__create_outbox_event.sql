-- The outbox: the events a guarded function returned, or the service emitted with Outbox.emit, written in the
-- transaction of their effect; the relay publishes the rows once they are committed, then sets published_at. One
-- outbox per schema, whatever the table name of processed events (hence IF NOT EXISTS). The first five columns are
-- the ones Debezium's Outbox Event Router reads by default: id (the event id, a UUID v7), aggregatetype (the
-- destination), aggregateid (the key: events of one key are published in the order their transactions committed),
-- type (the event name) and payload. position is the order of writing; the relay never skips an unpublished row,
-- whatever order transactions committed in. The same in both modes (plain and partitioned processed_event).
CREATE TABLE IF NOT EXISTS outbox_event (
    id            uuid        NOT NULL,
    aggregatetype text        NOT NULL,
    aggregateid   text        NOT NULL,
    type          text        NOT NULL,
    payload       jsonb       NOT NULL,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    position      bigint      GENERATED ALWAYS AS IDENTITY,
    published_at  timestamptz,
    CONSTRAINT outbox_event_pkey PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS outbox_event_unpublished_idx ON outbox_event (position) WHERE published_at IS NULL;

CREATE INDEX IF NOT EXISTS outbox_event_published_at_idx ON outbox_event (published_at) WHERE published_at IS NOT NULL;
