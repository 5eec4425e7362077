-- The library's tables on MariaDB 10.7 or later (the UUID type, INSERT ... RETURNING): the processed event ids, their
-- scopes, and the outbox. Services that migrate with Flyway (and flyway-mysql) get them from the library
-- (idempotency.migrate-with-flyway); others run this script with their own tool, renaming the tables if
-- idempotency.table-name says so (processed_event, processed_event_scope and processed_event_dead_letter become
-- <table>, <table>_scope and <table>_dead_letter; the outbox's tables keep their names).
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
    PRIMARY KEY (event_id, scope, event_name),
    INDEX processed_event_processed_at_idx (processed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The scopes processed_event holds claims under, registered by the guard at start-up (see schema-postgresql.sql).
CREATE TABLE processed_event_scope (
    scope         VARCHAR(255) NOT NULL,
    registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    copied_to     TEXT,
    PRIMARY KEY (scope)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The events the guard dead-lettered once their route was checked (see schema-postgresql.sql).
CREATE TABLE processed_event_dead_letter (
    binding          VARCHAR(255) NOT NULL,
    event_id         UUID         NOT NULL,
    event_name       VARCHAR(255) NOT NULL,
    body_sha256      BINARY(32)   NOT NULL,
    dead_lettered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    -- When a replay of it was applied: a dead letter no longer waiting (a copy of the replay is still taken).
    taken_back_at    TIMESTAMP(6) NULL DEFAULT NULL,
    PRIMARY KEY (binding, event_id, event_name, body_sha256),
    INDEX processed_event_dl_at_idx (dead_lettered_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The outbox: the events a guarded function returned, or the service emitted with Outbox.emit, written in the
-- transaction of their effect and published by the relay once committed (see schema-postgresql.sql for its columns).
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
    skipped_at      TIMESTAMP(6) NULL DEFAULT NULL,
    pending_key     VARCHAR(511) AS (IF(published_at IS NULL, CONCAT(aggregatetype, CHAR(0 USING utf8mb4), aggregateid), NULL)) PERSISTENT,
    PRIMARY KEY (id),
    UNIQUE KEY outbox_event_position_key (position),
    INDEX outbox_event_unpublished_idx (published_at, position),
    INDEX outbox_event_occurred_at_idx (occurred_at),
    INDEX outbox_event_held_idx (aggregatetype, aggregateid, published_at, attempts),
    INDEX outbox_event_pending_key_idx (pending_key, position)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The keys events were written for: a transaction that writes events locks its keys' rows (FOR UPDATE, until it
-- ends), so that the events of one key take their positions in the order their transactions commit. Purged after the
-- retention. A relay locks the partitions it publishes (rows of outbox_relay_lock, FOR UPDATE SKIP LOCKED), so that
-- the relays of several instances share them out: MariaDB has no lock a transaction releases other than a row's.
CREATE TABLE IF NOT EXISTS outbox_key (
    aggregatetype VARCHAR(255) NOT NULL,
    aggregateid   VARCHAR(255) NOT NULL,
    created_at    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (aggregatetype, aggregateid),
    INDEX outbox_key_created_at_idx (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

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
