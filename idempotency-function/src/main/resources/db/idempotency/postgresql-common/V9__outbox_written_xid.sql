-- The transaction that wrote (or republished) each row: the relay reads the rows committed since its last read by the
-- transactions its snapshot did not see, so that it reads each key's head past the rows it published (which a
-- transaction held open keeps in the indexes). Rows written before have none: the relay reads them at start.
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS written_xid bigint;

ALTER TABLE outbox_event ALTER COLUMN written_xid SET DEFAULT txid_current();

CREATE INDEX IF NOT EXISTS outbox_event_written_xid_idx ON outbox_event (written_xid) WHERE published_at IS NULL;
