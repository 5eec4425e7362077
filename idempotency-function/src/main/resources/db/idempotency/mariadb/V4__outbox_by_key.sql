-- The relay schedules the outbox by key: see the PostgreSQL migration of the same name. MariaDB reads the head of
-- every key with a pending row by a loose scan of outbox_event_pending_key_idx (one step per key).
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS skipped_at TIMESTAMP(6) NULL DEFAULT NULL;

UPDATE outbox_event SET skipped_at = published_at
WHERE parked_at IS NOT NULL AND published_at IS NOT NULL AND skipped_at IS NULL;

CREATE INDEX IF NOT EXISTS outbox_event_pending_key_idx ON outbox_event (aggregatetype, aggregateid, published_at, position);
