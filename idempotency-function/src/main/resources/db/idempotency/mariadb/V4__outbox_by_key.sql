-- The relay schedules the outbox by key: see the PostgreSQL migration of the same name. MariaDB reads the head of
-- every key with a pending row by a loose scan of outbox_event_pending_key_idx (one step per key).
ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS skipped_at TIMESTAMP(6) NULL DEFAULT NULL;

UPDATE outbox_event SET skipped_at = published_at
WHERE parked_at IS NOT NULL AND published_at IS NOT NULL AND skipped_at IS NULL;

CREATE INDEX IF NOT EXISTS outbox_event_pending_key_idx ON outbox_event (aggregatetype, aggregateid, published_at, position);

-- The keys that events were written for, whose rows a writer locks: see the PostgreSQL migration of the same name.
-- They replace the 256 lock slots of outbox_key_lock, which two writers of different keys shared.
CREATE TABLE IF NOT EXISTS outbox_key (
    aggregatetype VARCHAR(255) NOT NULL,
    aggregateid   VARCHAR(255) NOT NULL,
    created_at    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (aggregatetype, aggregateid),
    INDEX outbox_key_created_at_idx (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

DROP TABLE IF EXISTS outbox_key_lock;
