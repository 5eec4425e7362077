-- The events the guard dead-lettered once their route was checked: a dead letter moved back to its queue (on
-- RabbitMQ through <queue>.replay) carries no route the broker vouches for, so the guard takes it only when this
-- table holds its binding, id, name and body. A message anyone else put into the queue that way, or one the broker
-- dead-lettered itself (expired, over a length limit), has no row and is refused. Purged once older than
-- idempotency.replay-horizon.dead-letter-retention, after which a dead letter is not taken back either.
CREATE TABLE IF NOT EXISTS ${table}_dead_letter (
    binding          text        NOT NULL,
    event_id         uuid        NOT NULL,
    event_name       text        NOT NULL,
    body_sha256      bytea       NOT NULL,
    dead_lettered_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ${table}_dead_letter_pkey PRIMARY KEY (binding, event_id, event_name, body_sha256)
);

CREATE INDEX IF NOT EXISTS ${table}_dl_at_idx ON ${table}_dead_letter (dead_lettered_at);
