-- The relay schedules the outbox by key: see the PostgreSQL migration of the same name. MariaDB has no partial index:
-- pending_key is a row's destination and key while it is unpublished (NULL once published), and the relay reads the
-- head of every key with a pending row by a loose scan of outbox_event_pending_key_idx (one step per pending key;
-- the published rows are one NULL group it never reads).
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS skipped_at TIMESTAMP(6) NULL DEFAULT NULL;

UPDATE outbox_event SET skipped_at = published_at
WHERE parked_at IS NOT NULL AND published_at IS NOT NULL AND skipped_at IS NULL;

ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS pending_key VARCHAR(511)
    AS (IF(published_at IS NULL, CONCAT(aggregatetype, CHAR(0 USING utf8mb4), aggregateid), NULL)) PERSISTENT;

CREATE INDEX IF NOT EXISTS outbox_event_pending_key_idx ON outbox_event (pending_key, position);

-- The keys that events were written for, whose rows a writer locks: see the PostgreSQL migration of the same name.
-- They replace the 256 lock slots of outbox_key_lock, which two writers of different keys shared (the table is left
-- for the instances of earlier versions still running during a deployment; nothing reads it any more).
CREATE TABLE IF NOT EXISTS outbox_key (
    aggregatetype VARCHAR(255) NOT NULL,
    aggregateid   VARCHAR(255) NOT NULL,
    created_at    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (aggregatetype, aggregateid),
    INDEX outbox_key_created_at_idx (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
