-- The transaction that wrote each row, or made it unpublished again: the relay reads the rows committed since its last
-- read by the transactions its snapshot did not see, so that it reads each key's head past the rows it published
-- (which a transaction held open keeps in the indexes). Rows written before have none: the relay reads them at start.
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS written_xid bigint;

ALTER TABLE outbox_event ALTER COLUMN written_xid SET DEFAULT txid_current();

CREATE INDEX IF NOT EXISTS outbox_event_written_xid_idx ON outbox_event (written_xid) WHERE published_at IS NULL;

-- A row made unpublished again (Outbox.republish, or an operator's UPDATE ... SET published_at = NULL) is new to the
-- relay too.
CREATE OR REPLACE FUNCTION outbox_event_unpublished() RETURNS trigger LANGUAGE plpgsql
    AS 'BEGIN NEW.written_xid := txid_current(); RETURN NEW; END';

DROP TRIGGER IF EXISTS outbox_event_unpublished ON outbox_event;

CREATE TRIGGER outbox_event_unpublished BEFORE UPDATE OF published_at ON outbox_event
    FOR EACH ROW WHEN (NEW.published_at IS NULL AND OLD.published_at IS NOT NULL)
    EXECUTE PROCEDURE outbox_event_unpublished();
