-- What the relay knows of each row it could not publish, so that one refused row holds back its own key only:
-- publishable_at is when the row became publishable (its insert, at commit, or its republication), which the lag is
-- measured from; attempts counts the broker's refusals of the row, next_attempt_at is when the relay tries it again,
-- last_error says why it was refused, and parked_at is set once it was refused idempotency.outbox.relay.max-attempts
-- times: the relay leaves it, and the later rows of its key, until an operator releases or skips it. A row whose
-- parked_at is set and whose published_at too was skipped. The held index finds the keys held back without reading
-- the backlog. (publishable_at is added with now(), which fills the existing rows without rewriting the table.)
ALTER TABLE outbox_event
    ADD COLUMN IF NOT EXISTS publishable_at  timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS attempts        integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS next_attempt_at timestamptz,
    ADD COLUMN IF NOT EXISTS last_error      text,
    ADD COLUMN IF NOT EXISTS parked_at       timestamptz;

ALTER TABLE outbox_event ALTER COLUMN publishable_at SET DEFAULT clock_timestamp();

CREATE INDEX IF NOT EXISTS outbox_event_held_idx ON outbox_event (aggregatetype, aggregateid)
    WHERE published_at IS NULL AND attempts > 0;

-- Who publishes this schema's outbox: the library's relay ('relay'), or another process such as Debezium
-- ('external'). The first instance to start registers its idempotency.outbox.relay.enabled; an instance that
-- disagrees refuses to start (a relay and Debezium would both publish every row, and an instance without the relay
-- purges rows by age, published or not). One row at most.
CREATE TABLE IF NOT EXISTS outbox_publisher (
    publisher     text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    single        boolean     NOT NULL DEFAULT true,
    CONSTRAINT outbox_publisher_pkey PRIMARY KEY (single),
    CONSTRAINT outbox_publisher_single CHECK (single),
    CONSTRAINT outbox_publisher_publisher CHECK (publisher IN ('relay', 'external'))
);
