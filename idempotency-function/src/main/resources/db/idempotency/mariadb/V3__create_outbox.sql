-- The outbox on MariaDB: what schema-mariadb.sql creates. See schema-postgresql.sql for what each column of
-- outbox_event means. One per schema, whatever the table name of processed events.
CREATE TABLE IF NOT EXISTS outbox_event (
    id              UUID         NOT NULL,
    aggregatetype   VARCHAR(255) NOT NULL,
    aggregateid     VARCHAR(255) NOT NULL,
    type            VARCHAR(255) NOT NULL,
    payload         LONGTEXT     NOT NULL CHECK (JSON_VALID(payload)),
    occurred_at     TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    position        BIGINT       NOT NULL AUTO_INCREMENT,
    published_at    TIMESTAMP(6) NULL DEFAULT NULL,
    publishable_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    attempts        INT          NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP(6) NULL DEFAULT NULL,
    last_error      TEXT         NULL,
    parked_at       TIMESTAMP(6) NULL DEFAULT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY outbox_event_position_key (position),
    INDEX outbox_event_unpublished_idx (published_at, position),
    INDEX outbox_event_occurred_at_idx (occurred_at),
    INDEX outbox_event_held_idx (aggregatetype, aggregateid, published_at, attempts)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The locks of the outbox: a transaction that writes events locks its keys' slots (FOR UPDATE, until it ends), so
-- that the events of one key take their positions in the order their transactions commit; a relay locks the
-- partitions it publishes (FOR UPDATE SKIP LOCKED), so that the relays of several instances share them out. MariaDB
-- has no lock a transaction releases other than a row's: one row per slot, and per partition.
CREATE TABLE IF NOT EXISTS outbox_key_lock (
    slot SMALLINT NOT NULL,
    PRIMARY KEY (slot)
) ENGINE = InnoDB;

INSERT INTO outbox_key_lock (slot) SELECT seq FROM seq_0_to_255 ON DUPLICATE KEY UPDATE slot = VALUES(slot);

CREATE TABLE IF NOT EXISTS outbox_relay_lock (
    partition_no SMALLINT NOT NULL,
    PRIMARY KEY (partition_no)
) ENGINE = InnoDB;

INSERT INTO outbox_relay_lock (partition_no) SELECT seq FROM seq_0_to_255
ON DUPLICATE KEY UPDATE partition_no = VALUES(partition_no);

-- Who publishes the outbox: the library's relay ('relay'), or another process ('external'). One row at most.
CREATE TABLE IF NOT EXISTS outbox_publisher (
    publisher     VARCHAR(16)  NOT NULL,
    registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    single        BOOLEAN      NOT NULL DEFAULT TRUE,
    PRIMARY KEY (single),
    CONSTRAINT outbox_publisher_single CHECK (single),
    CONSTRAINT outbox_publisher_publisher CHECK (publisher IN ('relay', 'external'))
) ENGINE = InnoDB;
