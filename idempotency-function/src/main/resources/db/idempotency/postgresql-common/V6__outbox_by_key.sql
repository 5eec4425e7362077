-- The relay schedules the outbox by key: each run reads the head (oldest unpublished row) of every key that has one,
-- by a skip scan of outbox_event_pending_key_idx that costs one probe per key however many rows it holds, and takes
-- a fair share of rows from each key it publishes; a key held back or parked costs one probe, not its rows.
-- skipped_at marks a row an operator skipped: published_at is set too (the relay leaves it), and a republication of
-- its period leaves it skipped (it would be published after its key's later events). Rows skipped before this
-- version (parked_at and published_at both set) are marked so.
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS skipped_at timestamptz;

UPDATE outbox_event SET skipped_at = published_at
WHERE parked_at IS NOT NULL AND published_at IS NOT NULL AND skipped_at IS NULL;

CREATE INDEX IF NOT EXISTS outbox_event_pending_key_idx ON outbox_event (aggregatetype, aggregateid, position)
    WHERE published_at IS NULL;

-- The keys that events were written for: a transaction that writes events locks its keys' rows (inserting those that
-- are new, in their order, until it commits), so that the events of one key take their positions in the order their
-- transactions commit. Row locks, one per key: two transactions of different keys never wait for each other, and a
-- transaction of many keys takes no place in the server's shared lock table per key. The purge deletes the rows of
-- keys first written longer ago than the outbox's retention (a later write adds the row again).
CREATE TABLE IF NOT EXISTS outbox_key (
    aggregatetype text        NOT NULL,
    aggregateid   text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT outbox_key_pkey PRIMARY KEY (aggregatetype, aggregateid)
);

CREATE INDEX IF NOT EXISTS outbox_key_created_at_idx ON outbox_key (created_at);
